package nodetask

import (
	"context"
	"time"

	"github.com/google/uuid"

	"sluice/internal/nodeproto"
)

// Local is where serve's own node takes its tasks: from Tasks directly, as
// an agent takes them over the API. It implements agent.Source.
type Local struct {
	Tasks    *Tasks
	Node     string
	Instance string
}

// Claim implements agent.Source.
func (l *Local) Claim(ctx context.Context, wait time.Duration) (*nodeproto.Claimed, error) {
	return l.Tasks.ClaimStep(ctx, l.Node, l.Instance, wait)
}

// Events implements agent.Source.
func (l *Local) Events(ctx context.Context, id uuid.UUID, evs []nodeproto.Event) error {
	_, err := l.Tasks.Events(ctx, l.Node, l.Instance, id, evs)
	return err
}

// Finish implements agent.Source.
func (l *Local) Finish(ctx context.Context, id uuid.UUID, res *nodeproto.Result) (*nodeproto.Finished, error) {
	return l.Tasks.Finish(ctx, l.Node, l.Instance, id, res)
}
