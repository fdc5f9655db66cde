package nodetask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"sluice/internal/hoststep"
	"sluice/internal/nodeproto"
	"sluice/internal/phase"
)

// Remote takes the host steps of one run on a node whose agent is
// elsewhere: each step is a task the agent claims, and the call waits for
// its result. It implements services.Host.
type Remote struct {
	Tasks *Tasks
	Node  string
	Run   uuid.UUID
}

// call dispatches one step and decodes its answer into out, strictly: an
// answer of another shape than the step's fails the step with a sentence
// rather than pass as an empty one.
func (r *Remote) call(ctx context.Context, t *phase.Phases, kind string, payload any, digests []string, out any) error {
	return r.callSecrets(ctx, t, kind, payload, digests, nil, out)
}

// callSecrets is call for a step that hands its service secrets.
func (r *Remote) callSecrets(ctx context.Context, t *phase.Phases, kind string, payload any, digests []string, secrets map[string]nodeproto.Secret, out any) error {
	task, err := r.Tasks.DispatchSecrets(ctx, r.Node, r.Run, kind, payload, digests, secrets)
	if err != nil {
		return err
	}
	res, err := r.Tasks.Await(ctx, task)
	if err != nil {
		return err
	}
	return r.decode(t, kind, res, out)
}

// decode takes a step's result: its phases into t, its error as the step's,
// its value into out, strictly.
func (r *Remote) decode(t *phase.Phases, kind string, res *nodeproto.Result, out any) error {
	if t != nil {
		*t = append(*t, res.Phases...)
	}
	if res.Error != "" {
		return errors.New(res.Error)
	}
	if out == nil {
		return nil
	}
	if len(res.Value) == 0 {
		return fmt.Errorf("node %s answered the %s step with nothing", r.Node, kind)
	}
	dec := json.NewDecoder(bytes.NewReader(res.Value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("node %s answered the %s step with something else than its answer (%v); is its agent of another version?", r.Node, kind, err)
	}
	return nil
}

// wireSecrets are the values of req's secrets as a task hands them over.
func wireSecrets(req hoststep.ApplyRequest) map[string]nodeproto.Secret {
	var out map[string]nodeproto.Secret
	for k, v := range req.Secrets {
		if out == nil {
			out = make(map[string]nodeproto.Secret, len(req.Secrets))
		}
		out[k] = nodeproto.Secret{Ref: v.Ref.String(), Value: v.Value}
	}
	return out
}

// Apply implements services.Host.
func (r *Remote) Apply(ctx context.Context, _ hoststep.Events, t *phase.Phases, req hoststep.ApplyRequest) (*hoststep.Applied, error) {
	var a hoststep.Applied
	if err := r.callSecrets(ctx, t, nodeproto.KindApply, req, []string{req.Manifest.ArtifactDigest}, wireSecrets(req), &a); err != nil {
		return nil, err
	}
	if a.Probe == nil || a.Digest != req.Manifest.ArtifactDigest {
		return nil, fmt.Errorf("node %s answered the apply step of %s without a probe of %s", r.Node, req.Manifest.Service, hoststep.Short(req.Manifest.ArtifactDigest))
	}
	return &a, nil
}

// Begin dispatches the apply step of req and returns its task, without
// waiting: Collect takes its answer, in this job or in the run's
// continuation (the run waits for it without a worker meanwhile).
func (r *Remote) Begin(ctx context.Context, req hoststep.ApplyRequest) (uuid.UUID, error) {
	task, err := r.Tasks.DispatchSecrets(ctx, r.Node, r.Run, nodeproto.KindApply, req, []string{req.Manifest.ArtifactDigest}, wireSecrets(req))
	if err != nil {
		return uuid.Nil, err
	}
	return task.ID, nil
}

// Collect takes the answer of task, the apply step of req that Begin
// dispatched, waiting up to d for it (0: one look). done is false when the
// node has yet to answer and nothing says it never will.
func (r *Remote) Collect(ctx context.Context, t *phase.Phases, task uuid.UUID, req hoststep.ApplyRequest, d time.Duration) (a *hoststep.Applied, done bool, err error) {
	var res *nodeproto.Result
	if d > 0 {
		res, done, err = r.Tasks.Wait(ctx, task, d)
	} else {
		res, done, err = r.Tasks.Look(ctx, task)
	}
	if !done || err != nil {
		return nil, done, err
	}
	var out hoststep.Applied
	if err := r.decode(t, nodeproto.KindApply, res, &out); err != nil {
		return nil, true, err
	}
	if out.Probe == nil || out.Digest != req.Manifest.ArtifactDigest {
		return nil, true, fmt.Errorf("node %s answered the apply step of %s without a probe of %s", r.Node, req.Manifest.Service, hoststep.Short(req.Manifest.ArtifactDigest))
	}
	return &out, true, nil
}

// Until is the latest a run waiting for one of this node's steps without a
// worker looks again: a silent node is noticed within about two silence
// bounds (Wait notices it within one).
func (r *Remote) Until() time.Time { return time.Now().Add(r.Tasks.Nodes.SilenceBound()) }

// Reprobe implements services.Host.
func (r *Remote) Reprobe(ctx context.Context, _ hoststep.Events, t *phase.Phases, req hoststep.ApplyRequest) (*hoststep.Reprobed, error) {
	var a hoststep.Reprobed
	if err := r.callSecrets(ctx, t, nodeproto.KindReprobe, req, []string{req.Manifest.ArtifactDigest}, wireSecrets(req), &a); err != nil {
		return nil, err
	}
	if a.Applied == nil || a.Applied.Probe == nil {
		return nil, fmt.Errorf("node %s answered the reprobe step with nothing", r.Node)
	}
	return &a, nil
}

// Stop implements services.Host.
func (r *Remote) Stop(ctx context.Context, _ hoststep.Events, t *phase.Phases, name string) error {
	return r.call(ctx, t, nodeproto.KindStop, nodeproto.StopRequest{Name: name}, nil, nil)
}

// Remove implements services.Host.
func (r *Remote) Remove(ctx context.Context, _ hoststep.Events, t *phase.Phases, name string) error {
	return r.call(ctx, t, nodeproto.KindStop, nodeproto.StopRequest{Name: name, Remove: true}, nil, nil)
}

// DestroyData takes service req.Name down on the node and removes the data
// it owns: the destroy_data step.
func (r *Remote) DestroyData(ctx context.Context, _ hoststep.Events, t *phase.Phases, req hoststep.DestroyDataRequest) (*hoststep.DataDestroyed, error) {
	var a hoststep.DataDestroyed
	if err := r.call(ctx, t, nodeproto.KindDestroyData, req, nil, &a); err != nil {
		return nil, err
	}
	if a.Project == "" {
		return nil, fmt.Errorf("node %s answered the destroy_data step of %s without naming the project it took down", r.Node, req.Name)
	}
	return &a, nil
}

// Inspect implements services.Host.
func (r *Remote) Inspect(ctx context.Context, req hoststep.InspectRequest) (*hoststep.Inspection, error) {
	var in hoststep.Inspection
	var digests []string
	if req.Want != "" {
		digests = []string{req.Want}
	}
	if err := r.call(ctx, nil, nodeproto.KindInspect, req, digests, &in); err != nil {
		return nil, err
	}
	if in.Name != req.Name || in.UnitPath == "" {
		return nil, fmt.Errorf("node %s answered the inspect step of %s with an inspection of %q", r.Node, req.Name, in.Name)
	}
	return &in, nil
}

// UnitText implements services.Host.
func (r *Remote) UnitText(ctx context.Context, name string) ([]byte, error) {
	var a nodeproto.UnitTextAnswer
	if err := r.call(ctx, nil, nodeproto.KindUnitText, nodeproto.StopRequest{Name: name}, nil, &a); err != nil {
		return nil, err
	}
	if a.Missing {
		return nil, nil
	}
	return []byte(a.Text), nil
}
