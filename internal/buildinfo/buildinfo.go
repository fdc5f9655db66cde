// Package buildinfo says which build of sluice this is: the version, the
// commit it was built from, and the Go that built it. `sluice version`,
// /healthz and the sluice_build_info metric all read it from here.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// version, when set at link time, is the version every output reports:
//
//	go build -ldflags "-X sluice/internal/buildinfo.version=v1.4.0" ./cmd/sluice
//
// Empty (the default) takes the main module's version from the binary's
// build information: a tag, a pseudo-version Go derives from the commit
// (v0.0.0-20261203155334-35336934bc4c+dirty), or "devel" when the build
// recorded none (go run, tests, -buildvcs=false).
var version string

// Info is one build's identity.
type Info struct {
	// Version is the -X version, else the module's, else "devel".
	Version string `json:"version"`
	// Revision is the commit the binary was built from; "unknown" when the
	// build did not record one (built outside a checkout, or with
	// -buildvcs=false).
	Revision string `json:"revision"`
	// Time is the commit's time; zero when unknown.
	Time time.Time `json:"time,omitzero"`
	// Modified is true when the working tree differed from Revision.
	Modified bool `json:"modified"`
	// GoVersion is the Go release that built the binary (runtime.Version).
	GoVersion string `json:"goVersion"`
}

// Get returns this binary's build information. It is read once.
var Get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, version)
})

// read makes an Info of bi (nil when the binary has none) and the link-time
// version.
func read(bi *debug.BuildInfo, linked string) Info {
	info := Info{Version: linked, Revision: "unknown", GoVersion: runtime.Version()}
	if bi == nil {
		if info.Version == "" {
			info.Version = "devel"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				info.Revision = s.Value
			}
		case "vcs.time":
			info.Time, _ = time.Parse(time.RFC3339, s.Value)
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}
