package httpapi

import (
	"net/http"

	"sluice/internal/auth"
	"sluice/internal/errs"
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
