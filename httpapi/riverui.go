package httpapi

import (
	"encoding/json"
	"net/http"

	"sluice/internal/auth"
	"sluice/internal/errs"
)

// riverUIAuth puts River UI behind the API's tokens. Browsers cannot add a
// bearer header, so the token is also accepted as the basic-auth password
// (any user name). Reading needs viewer; anything that changes jobs, such as
// retry or cancel, needs operator.
func riverUIAuth(d Deps, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := bearer(r.Header.Get("Authorization"))
		if secret == "" {
			if _, pw, ok := r.BasicAuth(); ok {
				secret = pw
			}
		}
		tok, err := authenticate(r.Context(), d, secret)
		if errs.Is(err, errs.Unauthorized) {
			w.Header().Set("WWW-Authenticate", `Basic realm="sluice River UI (any user name, the API token as password)", charset="UTF-8"`)
		}
		if err != nil {
			writeProblem(w, r, d, err)
			return
		}
		need := auth.RoleViewer
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			need = auth.RoleOperator
		}
		if !auth.Role(tok.Role).Allows(need) {
			writeProblem(w, r, d, errs.Errorf(errs.Forbidden, "Token %q has the %s role; this needs %s.", tok.Name, tok.Role, need))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeProblem writes an RFC 9457 problem for handlers outside Huma.
func writeProblem(w http.ResponseWriter, r *http.Request, d Deps, err error) {
	se := mapError(r.Context(), d.Logger, err)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(se.GetStatus())
	_ = json.NewEncoder(w).Encode(map[string]any{
		"title":  http.StatusText(se.GetStatus()),
		"status": se.GetStatus(),
		"detail": se.Error(),
	})
}
