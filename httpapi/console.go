package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"sluice/internal/console"
)

// consolePolicy lets the console load its one script and one stylesheet from
// this server and talk to this server's API, and nothing else: no inline
// script or style, no other origin, no framing. The favicon is an empty data
// URL, so that a browser does not ask for /favicon.ico.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleReserved are the paths the console never answers, even where the
// mux has no route: the API's unknown routes stay the API's 404s and 405s.
var consoleReserved = []string{"/api", "/riverui", "/docs", "/healthz", "/readyz", "/metrics", "/openapi"}

type consoleFile struct {
	body        []byte
	etag        string
	contentType string
}

// withConsole serves the web console at / around mux: a GET or HEAD that no
// route of mux takes gets a built file when it names one, or index.html, so
// that a client route (/services/web) loads the console, which then routes
// itself. Everything else goes to mux untouched.
func withConsole(mux *http.ServeMux) http.Handler {
	files := map[string]consoleFile{}
	err := fs.WalkDir(console.Files(), ".", func(name string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		body, err := fs.ReadFile(console.Files(), name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(name))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		files[name] = consoleFile{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, contentType: ctype}
		return nil
	})
	if err != nil {
		panic("httpapi: embedded console: " + err.Error())
	}
	index, ok := files["index.html"]
	if !ok {
		panic("httpapi: the embedded console has no index.html; run make console")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if (r.Method != http.MethodGet && r.Method != http.MethodHead) || consoleReservedPath(p) || path.Clean(p) != p {
			mux.ServeHTTP(w, r)
			return
		}
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		f, ok := files[strings.TrimPrefix(p, "/")]
		if !ok {
			// A file at the root that is not one of the console's is a 404,
			// not the page: a broken asset link must show as one.
			if !strings.Contains(p[1:], "/") && path.Ext(p) != "" {
				http.NotFound(w, r)
				return
			}
			f = index
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Content-Security-Policy", consolePolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}

func consoleReservedPath(p string) bool {
	for _, prefix := range consoleReserved {
		if p == prefix || strings.HasPrefix(p, prefix+"/") || (prefix == "/openapi" && strings.HasPrefix(p, prefix)) {
			return true
		}
	}
	return false
}
