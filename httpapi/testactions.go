package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/auth"
	"sluice/internal/journal"
	"sluice/jobs"
)

type holdInput struct {
	Body struct {
		Target      string `json:"target" minLength:"1"`
		Seconds     int    `json:"seconds" minimum:"0" maximum:"3600"`
		Fail        bool   `json:"fail,omitempty"`
		JoinRunning bool   `json:"joinRunning,omitempty"`
	}
}

// registerTestActions adds POST /api/v1/test/hold, which enqueues the
// test-only hold action. It is off unless SLUICE_ENABLE_TEST_ACTIONS=1 and
// is never part of the published spec: it lives on an API of its own.
func registerTestActions(api huma.API, d Deps) {
	o := op("test-hold", http.MethodPost, "/test/hold", "Hold a run open (test-only).", auth.RoleOperator)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *holdInput) (*ActionAccepted, error) {
		res, err := d.Journal.Enqueue(ctx, journal.EnqueueParams{
			Args:        &jobs.HoldArgs{Target: in.Body.Target, Seconds: in.Body.Seconds, Fail: in.Body.Fail},
			Target:      in.Body.Target,
			RequestedBy: requester(ctx),
			Params:      in.Body,
			JoinRunning: in.Body.JoinRunning,
		})
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})
}
