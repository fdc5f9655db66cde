package httpapi

import (
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/metrics"
)

// metricsAuth serves next (the /metrics handler) to requests with a viewer
// token, as a bearer token or as basic auth's password (Prometheus sends
// either), or to anyone when public (SLUICE_METRICS_PUBLIC).
func metricsAuth(d Deps, next http.Handler, public bool) http.Handler {
	if public {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := bearer(r.Header.Get("Authorization"))
		if secret == "" {
			if _, pw, ok := r.BasicAuth(); ok {
				secret = pw
			}
		}
		tok, err := authenticate(r.Context(), d, secret)
		if err != nil {
			writeProblem(w, r, d, err)
			return
		}
		if !auth.Role(tok.Role).Allows(auth.RoleViewer) {
			writeProblem(w, r, d, errs.Errorf(errs.Forbidden, "Token %q has the %s role; /metrics needs %s.", tok.Name, tok.Role, auth.RoleViewer))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// observeRequests times every request next answers into m's
// sluice_http_request_duration_seconds, by route and status. The route is
// the API operation's id (ops maps each operation's mux pattern to it), or
// a fixed name for the other paths: healthz, readyz, metrics, openapi,
// docs, riverui, console, and other for whatever no route takes. A raw
// path never becomes a label, so the series stay bounded however many
// paths clients try. A stream counts its whole length.
func observeRequests(m *metrics.Endpoint, mux *http.ServeMux, ops map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, pattern := mux.Handler(r)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		m.ObserveRequest(routeName(r, pattern, ops), rec.status, time.Since(start))
	})
}

// routeName names the route of r, which mux matched to pattern ("" when
// none).
func routeName(r *http.Request, pattern string, ops map[string]string) string {
	if id, ok := ops[pattern]; ok {
		return id
	}
	p := pattern
	if _, after, ok := strings.Cut(pattern, " "); ok {
		p = after
	}
	switch {
	case p == "/healthz":
		return "healthz"
	case p == "/readyz":
		return "readyz"
	case p == "/metrics":
		return "metrics"
	case strings.HasPrefix(p, "/openapi"):
		return "openapi"
	case strings.HasPrefix(p, "/docs"):
		return "docs"
	case p == "/riverui" || p == "/riverui/":
		return "riverui"
	case pattern == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		!consoleReservedPath(r.URL.Path) && path.Clean(r.URL.Path) == r.URL.Path:
		// What withConsole serves: the console's files and its page.
		return "console"
	}
	return "other"
}

// operationRoutes maps the mux pattern of each of api's operations (as
// humago registers it) to the operation's id.
func operationRoutes(api huma.API) map[string]string {
	routes := map[string]string{}
	for _, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Options, item.Head, item.Patch, item.Trace} {
			if op != nil {
				routes[strings.ToUpper(op.Method)+" "+op.Path] = op.OperationID
			}
		}
	}
	return routes
}
