// Package console holds the web console: its TypeScript sources (src/), the
// esbuild script that bundles them (build.mjs), and the built files (dist/),
// which are committed like other generated code and embedded here, so that
// building sluice needs no Node. `make console` rebuilds dist/.
package console

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Files returns the built console: index.html, app.js and app.css at its root.
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("console: embedded dist: " + err.Error())
	}
	return sub
}
