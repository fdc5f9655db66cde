package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"sluice/internal/buildinfo"
)

// HealthReport is /healthz's answer: the process serves, and which build it
// is. Clients have read status since the first release; the build's fields
// came after it, beside it.
type HealthReport struct {
	// Status is always "ok": a process that answers serves.
	Status string `json:"status"`
	// Version, Revision and GoVersion are buildinfo's: what `sluice
	// version` prints and sluice_build_info's labels.
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
}

// ReadyReport is /readyz's answer: each check is "ok" or why it is not.
type ReadyReport struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"`
}

// registerHealth mounts the open endpoints. /healthz says the process
// serves, and which build it is; /readyz says it can do its work.
func registerHealth(mux *http.ServeMux, d Deps) {
	bi := buildinfo.Get()
	health := HealthReport{Status: "ok", Version: bi.Version, Revision: bi.Revision, GoVersion: bi.GoVersion}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, health)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rep := ReadyReport{Ready: true, Checks: map[string]string{}}
		if d.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			rep = d.Ready(ctx)
			cancel()
		}
		status := http.StatusOK
		if !rep.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, rep)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
