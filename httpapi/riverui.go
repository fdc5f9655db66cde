package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/journal"
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
		if op, ok := riverUIJobOps[strings.TrimPrefix(r.URL.Path, "/riverui")]; ok && r.Method == http.MethodPost {
			riverUIJobOp(w, r, d, op, tok.Name)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// riverUIJobOps are River UI's job buttons, by the path its page posts to.
// sluice answers them itself, so that each is a receipt of the token that
// pressed it (journal.OperateJobs).
var riverUIJobOps = map[string]journal.JobOp{
	"/api/jobs/retry":  journal.JobRetry,
	"/api/jobs/cancel": journal.JobCancel,
	"/api/jobs/delete": journal.JobDelete,
}

// riverUIJobOp does op to the jobs River UI's page names, as River UI's
// own handler would, and answers as it does: {"status": "ok"}, or
// {"message": …} with the status.
func riverUIJobOp(w http.ResponseWriter, r *http.Request, d Deps, op journal.JobOp, by string) {
	var body struct {
		IDs []jobID `json:"ids"`
	}
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		reply(http.StatusBadRequest, map[string]string{"message": "The body must be {\"ids\": [job ids]}: " + err.Error()})
		return
	}
	ids := make([]int64, len(body.IDs))
	for i, id := range body.IDs {
		ids[i] = int64(id)
	}
	if err := d.Journal.OperateJobs(r.Context(), op, ids, by); err != nil {
		se := mapError(r.Context(), d.Logger, err)
		status := se.GetStatus()
		if status == http.StatusUnprocessableEntity {
			status = http.StatusBadRequest
		}
		reply(status, map[string]string{"message": se.Error()})
		return
	}
	reply(http.StatusOK, map[string]string{"status": "ok"})
}

// jobID is a job id as River UI sends it: a JSON string of digits (an int64
// does not fit a JavaScript number), or a number.
type jobID int64

func (i *jobID) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("job id %s is not a number", data)
	}
	*i = jobID(n)
	return nil
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
