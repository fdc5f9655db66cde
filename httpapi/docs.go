package httpapi

import (
	"embed"
	"net/http"
)

// docsFiles are the API reference's page and Redoc's standalone bundle
// (docs/README.md says which version, and its license), embedded so that
// /docs works offline: Huma's own page loads its script from a CDN.
//
//go:embed docs/index.html docs/redoc.standalone.js
var docsFiles embed.FS

// docsPolicy lets the page load only from this server; Redoc's styles are
// inline, its search runs in a worker made from a blob, and its icons are
// data URLs. The one outside load the bundle would make, Redocly's logo from
// its CDN, is refused, and Redoc then leaves the image out.
const docsPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveDocs serves the API reference at /docs, open like the spec it renders.
func serveDocs(mux *http.ServeMux) {
	serve := func(path, file, contentType string) {
		body, err := docsFiles.ReadFile(file)
		if err != nil {
			panic("httpapi: embedded " + file + ": " + err.Error())
		}
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Content-Security-Policy", docsPolicy)
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = w.Write(body)
		})
	}
	serve("/docs", "docs/index.html", "text/html; charset=utf-8")
	serve("/docs/redoc.standalone.js", "docs/redoc.standalone.js", "text/javascript; charset=utf-8")
}
