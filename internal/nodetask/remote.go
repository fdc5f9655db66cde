package nodetask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"sluice/internal/hoststep"
	"sluice/internal/journal"
)

// Remote takes the host steps of one run on a node whose agent is
// elsewhere: each step is a task the agent claims, and the call waits for
// its result. It implements services.Host.
type Remote struct {
	Tasks *Tasks
	Node  string
	Run   uuid.UUID
}

// call dispatches one step and decodes its answer into out.
func (r *Remote) call(ctx context.Context, t *journal.Phases, kind string, payload any, digests []string, out any) error {
	task, err := r.Tasks.Dispatch(ctx, r.Node, r.Run, kind, payload, digests)
	if err != nil {
		return err
	}
	res, err := r.Tasks.Await(ctx, task)
	if err != nil {
		return err
	}
	if t != nil {
		*t = append(*t, res.Phases...)
	}
	if res.Error != "" {
		return errors.New(res.Error)
	}
	if out != nil && len(res.Value) > 0 {
		if err := json.Unmarshal(res.Value, out); err != nil {
			return fmt.Errorf("read node %s's answer to the %s step: %w", r.Node, kind, err)
		}
	}
	return nil
}

// Apply implements services.Host.
func (r *Remote) Apply(ctx context.Context, _ hoststep.Events, t *journal.Phases, req hoststep.ApplyRequest) (*hoststep.Applied, error) {
	var a hoststep.Applied
	if err := r.call(ctx, t, KindApply, req, []string{req.Manifest.ArtifactDigest}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Reprobe implements services.Host.
func (r *Remote) Reprobe(ctx context.Context, _ hoststep.Events, t *journal.Phases, req hoststep.ApplyRequest) (*hoststep.Reprobed, error) {
	var a hoststep.Reprobed
	if err := r.call(ctx, t, KindReprobe, req, []string{req.Manifest.ArtifactDigest}, &a); err != nil {
		return nil, err
	}
	if a.Applied == nil {
		return nil, fmt.Errorf("node %s answered the reprobe step with nothing", r.Node)
	}
	return &a, nil
}

// StopRequest asks to stop a service.
type StopRequest struct {
	Name string `json:"name"`
	// Remove asks to delete the service's unit and records after stopping
	// it: a withdrawal.
	Remove bool `json:"remove,omitempty"`
}

// Stop implements services.Host.
func (r *Remote) Stop(ctx context.Context, _ hoststep.Events, t *journal.Phases, name string) error {
	return r.call(ctx, t, KindStop, StopRequest{Name: name}, nil, nil)
}

// Remove implements services.Host.
func (r *Remote) Remove(ctx context.Context, _ hoststep.Events, t *journal.Phases, name string) error {
	return r.call(ctx, t, KindStop, StopRequest{Name: name, Remove: true}, nil, nil)
}

// Inspect implements services.Host.
func (r *Remote) Inspect(ctx context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error) {
	var in hoststep.Inspection
	var digests []string
	if req.Want != "" {
		digests = []string{req.Want}
	}
	if err := r.call(ctx, nil, KindInspect, req, digests, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// unitTextAnswer carries a unit's text; Missing when there is none.
type unitTextAnswer struct {
	Text    string `json:"text"`
	Missing bool   `json:"missing"`
}

// UnitText implements services.Host.
func (r *Remote) UnitText(ctx context.Context, name string) ([]byte, error) {
	var a unitTextAnswer
	if err := r.call(ctx, nil, KindUnitText, StopRequest{Name: name}, nil, &a); err != nil {
		return nil, err
	}
	if a.Missing {
		return nil, nil
	}
	return []byte(a.Text), nil
}

// Execute takes one task's step on h, sending its events to ev.
func Execute(ctx context.Context, h *hoststep.Host, kind string, payload json.RawMessage, ev hoststep.Events) *Result {
	res := &Result{}
	var (
		val any
		err error
	)
	switch kind {
	case KindApply:
		var req hoststep.ApplyRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			val, err = h.Apply(ctx, ev, &res.Phases, req)
		}
	case KindReprobe:
		var req hoststep.ApplyRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			val, err = h.Reprobe(ctx, ev, &res.Phases, req)
		}
	case KindStop:
		var req StopRequest
		switch err = json.Unmarshal(payload, &req); {
		case err == nil && req.Remove:
			err = h.Remove(ctx, ev, &res.Phases, req.Name)
		case err == nil:
			err = h.Stop(ctx, ev, &res.Phases, req.Name)
		}
	case KindInspect:
		var req hoststep.InspectRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			val, err = h.Inspect(ctx, req)
		}
	case KindUnitText:
		var req StopRequest
		if err = json.Unmarshal(payload, &req); err == nil {
			var text []byte
			text, err = h.UnitText(ctx, req.Name)
			val = unitTextAnswer{Text: string(text), Missing: text == nil}
		}
	default:
		err = fmt.Errorf("this agent does not know the %q step; upgrade it", kind)
	}
	if err != nil {
		res.Error = strings.ReplaceAll(err.Error(), "\x00", "\uFFFD")
		return res
	}
	if val != nil {
		b, _ := json.Marshal(val)
		res.Value = scrubNUL(b)
	}
	return res
}

// scrubNUL replaces NULs in encoded JSON, which PostgreSQL cannot store,
// with U+FFFD: a host's output may hold anything.
func scrubNUL(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte(`\u0000`), []byte(`\ufffd`))
}
