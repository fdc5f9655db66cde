package services

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/nodetask"
	"sluice/internal/servicespec"
)

// Parker is a Host that takes the apply step as a task of the node's
// (nodetask.Remote): the action need not hold its worker while the step
// and its probe run. Begin dispatches it; Collect takes its answer,
// waiting up to d (0: one look), done false while the node has yet to
// answer; Until is the latest a run waiting for it looks again.
type Parker interface {
	Begin(ctx context.Context, req hoststep.ApplyRequest) (uuid.UUID, error)
	Collect(ctx context.Context, t *journal.Phases, task uuid.UUID, req hoststep.ApplyRequest, d time.Duration) (*Applied, bool, error)
	Until() time.Time
}

// DefaultParkAfter is how long a deploy, rollback or converge waits for its
// apply step in its worker before it gives the worker back and waits
// without one (journal.Park): none. A step answers in a few hundred ms at
// best (a restart and a probe), and a worker held that long by each of a
// hundred busy services is what kept an idle one's converge waiting; a park
// and its wake cost tens of ms.
const DefaultParkAfter = 0

// ActionContinue continues a deploy, rollback or converge that waited for
// its apply step without a worker.
const ActionContinue = "service_continue"

// ContinueArgs continue the parked run of Service (journal.Park); the run
// is found by the job, which the park named.
type ContinueArgs struct {
	Service string    `json:"service"`
	Run     uuid.UUID `json:"run"`
}

// Kind implements river.JobArgs.
func (ContinueArgs) Kind() string { return ActionContinue }

// InsertOpts implements river.JobArgsWithInsertOpts: in the services
// queue, ahead of new requests (a continuation ends a run that holds its
// service's lane).
func (ContinueArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, Queue: Queue, Priority: 1}
}

// act is a deploy's, rollback's or converge's state from its apply step on:
// what its end needs, and what its park keeps. It holds no secret: the
// values the step needed were handed to the node's task, sealed, and are
// read again if a retry needs them.
type act struct {
	Action   string    `json:"action"`
	Name     string    `json:"name"`
	Result   *Result   `json:"result"`
	Unit     *db.Unit  `json:"unit"`
	Prev     []byte    `json:"prev,omitempty"`
	OldImage string    `json:"oldImage,omitempty"`
	Target   string    `json:"target"`
	Commit   string    `json:"commit,omitempty"`
	Task     uuid.UUID `json:"task"`
	// Since is when the action began to wait without a worker.
	Since time.Time `json:"since"`
	// Project is a compose service's project as the action read it, which
	// its continuation applies (the commit in force may have moved since).
	Project *servicespec.ComposeProject `json:"project,omitempty"`

	spec *servicespec.Spec
}

// parker returns the Parker that takes the apply step on node for run; nil
// when the step runs in this job (a one-host sluice, or parking is off).
func (s *Service) parker(node string, run uuid.UUID) Parker {
	if s.single() || s.Remote == nil || s.ParkAfter < 0 {
		return nil
	}
	pk, _ := s.Remote(node, run).(Parker)
	return pk
}

func (s *Service) parkAfter() time.Duration {
	return max(s.ParkAfter, DefaultParkAfter)
}

// apply takes the apply step of a's service and ends the action with its
// answer, or parks the run until the answer comes.
func (s *Service) apply(ctx context.Context, h Host, p *journal.Progress, out *journal.Outcome, a *act) (*journal.Outcome, error) {
	res, t := a.Result, &a.Result.Phases
	req, err := s.withSecrets(ctx, p, a.Unit, a.spec, applyRequest(a.spec, a.Name, ""))
	if err != nil {
		return s.tail(ctx, h, p, out, a, req, nil, err)
	}
	pk := s.parker(res.Node, p.RunID())
	if pk == nil {
		applied, err := h.Apply(ctx, p, t, req)
		return s.tail(ctx, h, p, out, a, req, applied, err)
	}
	task, err := pk.Begin(ctx, req)
	if err != nil {
		return s.tail(ctx, h, p, out, a, req, nil, err)
	}
	applied, done, err := pk.Collect(ctx, t, task, req, s.parkAfter())
	if done {
		return s.tail(ctx, h, p, out, a, req, applied, err)
	}
	a.Task, a.Since, a.Commit, a.Project = task, time.Now(), out.Commit, a.spec.Project()
	return s.park(p, pk, out, a), nil
}

// park is the outcome that parks a's run until its apply step answers.
func (s *Service) park(p *journal.Progress, pk Parker, out *journal.Outcome, a *act) *journal.Outcome {
	task := a.Task
	out.Park = &journal.Park{
		Args:  ContinueArgs{Service: a.Name, Run: p.RunID()},
		Opts:  ContinueArgs{}.InsertOpts(),
		State: a,
		Until: pk.Until(),
		Wake:  nodetask.WakeKey(task),
		ReadyTx: func(ctx context.Context, tx pgx.Tx) (bool, error) {
			return nodetask.ReadyTx(ctx, tx, task)
		},
		Message: fmt.Sprintf("the %s step of %s runs on node %s (task %s)", "apply", a.Name, a.Result.Node, task),
	}
	return out
}

// Continue is the body of a ContinueArgs job: it takes the answer of the
// apply step its run parked on and ends the action as it would have ended
// in its first job, or parks again while the node has yet to answer.
func (s *Service) Continue(ctx context.Context, p *journal.Progress, args ContinueArgs) (*journal.Outcome, error) {
	a := &act{}
	if raw := p.Parked(); raw == nil {
		return nil, fmt.Errorf("run %s has no park to continue from", p.RunID())
	} else if err := json.Unmarshal(raw, a); err != nil || a.Result == nil || a.Unit == nil {
		return nil, fmt.Errorf("run %s's park cannot be read (%v); its outcome is unknown", p.RunID(), err)
	}
	spec, err := servicespec.Parse(a.Unit.Name, a.Unit.Content)
	if err == nil {
		err = resolveTx(ctx, db.New(s.Pool), a.Unit, spec)
	}
	if err == nil && spec.Runtime == servicespec.RuntimeCompose {
		if a.Project == nil {
			err = fmt.Errorf("its park holds no Compose project")
		} else {
			spec.UseProject(a.Project)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read the unit of %s as it was applied: %w", a.Name, err)
	}
	a.spec = spec
	res := a.Result
	out := &journal.Outcome{Result: res, Commit: a.Commit, DigestFrom: res.DigestFrom, DigestTo: res.DigestTo}
	pk := s.parker(res.Node, p.RunID())
	if pk == nil {
		return out, journal.Unknown(fmt.Errorf("this process cannot take the answer of the apply step of %s on node %s (task %s)", a.Name, res.Node, a.Task))
	}
	req := applyRequest(spec, a.Name, "")
	applied, done, err := pk.Collect(ctx, &res.Phases, a.Task, req, s.parkAfter())
	if !done {
		return s.park(p, pk, out, a), nil
	}
	h, herr := s.host(res.Node, p.RunID())
	if herr != nil {
		return out, herr
	}
	if err == nil && !applied.Probe.OK && res.OnProbeFailure == servicespec.OnProbeFailureRetryOnce {
		// The retry hands the service its secrets again.
		withValues, serr := s.withSecrets(ctx, p, a.Unit, spec, req)
		if serr != nil {
			p.Error(ctx, "retry-once: the service's secrets cannot be read again: "+serr.Error(), nil)
		} else {
			req = withValues
		}
	}
	return s.tail(ctx, h, p, out, a, req, applied, err)
}

// tail ends a's action with the answer of its apply step.
func (s *Service) tail(ctx context.Context, h Host, p *journal.Progress, out *journal.Outcome, a *act, req hoststep.ApplyRequest, applied *Applied, applyErr error) (*journal.Outcome, error) {
	applied, policy, retried, applyErr := s.underPolicy(ctx, h, p, a, req, applied, applyErr)
	if a.Action == ActionConverge {
		return s.convergeTail(ctx, h, p, out, a, applied, policy, retried, applyErr)
	}
	return s.deployTail(ctx, h, p, out, a, applied, policy, retried, applyErr)
}
