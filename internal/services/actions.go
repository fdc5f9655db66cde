package services

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/artifact"
	"sluice/internal/errs"
	"sluice/internal/gitsync"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/render"
	"sluice/internal/servicespec"
	"sluice/internal/unit"
)

// imagePath is where a Service unit pins its artifact.
var imagePath = []string{"spec", "image"}

// Result is a service action's receipt (journal_run.result).
type Result struct {
	Service    string `json:"service"`
	Action     string `json:"action" enum:"deploy,rollback,converge"`
	DigestFrom string `json:"digestFrom,omitempty"`
	DigestTo   string `json:"digestTo"`
	// SyncedCommit is the commit the manifest was read from.
	SyncedCommit string `json:"syncedCommit,omitempty"`
	// PinCommit is the commit a deploy pushed; RevertCommit the one that
	// undid it after a failed probe.
	PinCommit    string `json:"pinCommit,omitempty"`
	RevertCommit string `json:"revertCommit,omitempty"`
	UnitPath     string `json:"unitPath,omitempty"`
	// ComposeService is, for a deploy of a Compose project, the Compose
	// service whose pin it moved, from ComposeImageFrom to ComposeImageTo
	// (each registry/repo@sha256:…); DigestFrom and DigestTo are then the
	// project's identities before and after.
	ComposeService   string `json:"composeService,omitempty" doc:"For a deploy of a Compose project: the Compose service whose pin it moved."`
	ComposeImageFrom string `json:"composeImageFrom,omitempty" doc:"For a deploy of a Compose project: the Compose service's pin before, registry/repo@sha256:…."`
	ComposeImageTo   string `json:"composeImageTo,omitempty" doc:"For a deploy of a Compose project: the Compose service's pin it deployed, registry/repo@sha256:…."`
	// ManifestHash is the content hash of the unit as applied.
	ManifestHash string   `json:"manifestHash,omitempty"`
	Applied      *Applied `json:"applied,omitempty"`
	// Restored is the previous unit, started again after a failed deploy.
	Restored *Applied `json:"restored,omitempty"`
	// OnProbeFailure is the health rollout policy the run ran under: the
	// spec's, else the action's default (rollback for deploy and rollback,
	// stop for converge).
	OnProbeFailure string `json:"onProbeFailure"`
	// Retry is the second probe under retry-once (a restart too when the
	// process had exited); absent when there was none.
	Retry  *Applied       `json:"retry,omitempty"`
	Phases journal.Phases `json:"phases"`
	// Running says in one sentence what runs now.
	Running string `json:"running,omitempty"`
	// Node is the node the host steps ran on; MovedFrom the node the
	// service ran on before, when this run moved it.
	Node      string `json:"node,omitempty"`
	MovedFrom string `json:"movedFrom,omitempty"`
}

// Deploy is the deploy action's body.
func (s *Service) Deploy(ctx context.Context, p *journal.Progress, args DeployArgs) (*journal.Outcome, error) {
	return s.deploy(ctx, p, ActionDeploy, args.Service, args.ComposeService, args.Digest)
}

// Rollback is the rollback action's body: a deploy of the previous healthy
// digest, as known at the action's turn.
func (s *Service) Rollback(ctx context.Context, p *journal.Progress, args RollbackArgs) (*journal.Outcome, error) {
	return s.deploy(ctx, p, ActionRollback, args.Service, "", "")
}

// syncService syncs the source of service name and returns the service as
// the branch now holds it.
func (s *Service) syncService(ctx context.Context, p *journal.Progress, t *journal.Phases, phase, name string, res *Result) (*db.Unit, *servicespec.Spec, error) {
	before, err := db.New(s.Pool).ServiceGet(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, errs.Errorf(errs.NotFound, "No active service is named %q any more; nothing was changed.", name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load service %s: %w", name, err)
	}
	if err := t.Do(phase, func() error {
		r, err := s.GitOps.SyncNow(ctx, p, before.SourceID)
		if err == nil {
			res.SyncedCommit = r.Commit
		}
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("sync before acting: %w", err)
	}
	u, spec, err := getTx(ctx, db.New(s.Pool), name)
	if errs.CodeOf(err) == errs.NotFound {
		return nil, nil, errs.Errorf(errs.NotFound, "Service %s is no longer in Git at commit %s (its unit went stale or was renamed); nothing was changed.", name, shortCommit(res.SyncedCommit))
	}
	if err != nil {
		return nil, nil, err
	}
	if err := powersTx(ctx, db.New(s.Pool), u, spec); err != nil {
		return nil, nil, err
	}
	if err := s.readProject(ctx, u, spec); err != nil {
		return nil, nil, err
	}
	res.UnitPath, res.ManifestHash = u.Path, u.ContentHash
	return u, spec, nil
}

// deploy moves the pin of service name to target and applies it: for a
// Compose project, the pin of its Compose service svc, and what runs is then
// the identity of the project with that pin. A rollback (svc and target
// "") goes to the previous healthy digest.
func (s *Service) deploy(ctx context.Context, p *journal.Progress, action, name, svc, target string) (*journal.Outcome, error) {
	res := &Result{Service: name, Action: action, OnProbeFailure: servicespec.OnProbeFailureRollback, Phases: journal.Phases{}}
	t := &res.Phases
	out := &journal.Outcome{Result: res}

	u, spec, err := s.syncService(ctx, p, t, "sync", name, res)
	if err != nil {
		return out, err
	}
	s.notePolicy(ctx, p, res, spec)
	pinned := spec.Digest()
	if action == ActionRollback {
		if target, err = previousHealthy(ctx, db.New(s.Pool), name, pinned); err != nil {
			return out, err
		}
		if target == "" {
			return out, errs.Errorf(errs.Conflict, "Service %s has no previous healthy digest at its turn: no succeeded run left a digest other than the pin %s running; nothing was changed.", name, pinned)
		}
	}
	if target == pinned {
		return out, errs.Errorf(errs.Conflict, "Git already pins %s to %s (checked again at its turn), so nothing was committed or restarted. To re-apply what Git holds, converge: `sluice converge %s`.", name, target, name)
	}
	if spec.Runtime == servicespec.RuntimeCompose && action == ActionRollback {
		return s.rollbackProject(ctx, p, out, u, spec, target)
	}
	// digest is what the pin moves to; target what then runs: the same
	// digest, or for a Compose project the identity of the project with
	// the new pin.
	digest, path, oldImage := target, imagePath, spec.Image
	if action == ActionDeploy {
		ref, err := deployPin(spec, name, svc)
		if err != nil {
			return out, errs.Errorf(errs.CodeOf(err), "At its turn: %s Nothing was committed or restarted.", errs.MessageOf(err))
		}
		if ref != "" {
			if was, _ := artifact.ParseDigest(ref); was == digest {
				return out, errs.Errorf(errs.Conflict, "Git already pins Compose service %s of %s to %s (checked again at its turn), so nothing was committed or restarted. To re-apply what Git holds, converge: `sluice converge %s`.", svc, name, digest, name)
			}
			path, oldImage = composeImagePath(svc), ref
			res.ComposeService, res.ComposeImageFrom, res.ComposeImageTo = svc, ref, repin(ref, digest)
			target = spec.Project().WithPin(svc, res.ComposeImageTo).Identity()
		}
	}
	if err := s.requireArtifact(ctx, spec, digest); err != nil {
		return out, err
	}
	// A secret the service cannot get would fail the apply after the pin
	// was pushed (and then reverted): find it first.
	if err := s.checkSecrets(ctx, u, spec); err != nil {
		return out, err
	}
	if err := pinAllowedTx(ctx, db.New(s.Pool), u, name); err != nil {
		return out, err
	}
	from := deref(u.RunningDigest)
	res.DigestFrom, res.DigestTo = from, target
	out.DigestFrom, out.DigestTo = from, target
	if deref(p.Run().DigestFrom) != from || deref(p.Run().DigestTo) != target {
		if err := p.SetDigests(ctx, from, target, fmt.Sprintf("at its turn, %s runs %s and goes to %s", name, orNone(from), target)); err != nil {
			return out, err
		}
	}

	// Pin: only the digest of the unit file changes; the rest stays byte-identical.
	pinText, whose := digest, name // what the pin names, and whose pin it is, in sentences
	if res.ComposeService != "" {
		pinText, whose = svc+" to "+digest, "Compose service "+svc+" of "+name
	}
	msg := fmt.Sprintf("%s %s: pin %s\n\nRun %s, requested by %s.", action, name, pinText, p.RunID(), p.Run().RequestedBy)
	var push *gitsync.PushResult
	err = t.Do("pin", func() error {
		var err error
		push, err = s.GitOps.CommitFile(ctx, u.SourceID, u.Path, func(old []byte) ([]byte, error) {
			img, err := unit.GetString(old, path)
			if err != nil {
				return nil, err
			}
			return unit.SetString(old, path, repin(img, digest))
		}, msg)
		return err
	})
	switch {
	case errors.Is(err, gitsync.ErrNoChange):
		p.Info(ctx, fmt.Sprintf("the branch already pins %s; no commit needed", pinText), nil)
	case err != nil:
		return out, fmt.Errorf("pin %s in %s: %w", pinText, u.Path, err)
	default:
		res.PinCommit = push.Commit
		out.Commit = push.Commit
		p.Info(ctx, fmt.Sprintf("pushed commit %s pinning %s to %s", shortCommit(push.Commit), whose, short(digest)), nil)
	}

	u, spec, err = s.syncService(ctx, p, t, "sync-pin", name, res)
	if err != nil {
		if res.PinCommit == "" || ctx.Err() != nil {
			return out, err
		}
		return out, fmt.Errorf("Pushed commit %s pinning %s to %s, but could not read it back: %w. Nothing was restarted; Git is ahead of what runs: converge applies the pin, or revert the commit", shortCommit(res.PinCommit), whose, digest, err)
	}
	if out.Commit == "" {
		out.Commit = res.SyncedCommit
	}
	if now := pinOf(spec, res.ComposeService); now != digest {
		return out, errs.Errorf(errs.Conflict, "The pin of %s moved to %s right after this %s pushed %s; nothing was restarted. Deploy again if %s is still wanted.", whose, orNone(now), action, digest, digest)
	}
	if id := spec.Digest(); id != target {
		// The files moved too, between the two syncs: what runs is the
		// project as Git holds it now, with this pin.
		if err := p.SetDigests(ctx, from, id, fmt.Sprintf("the project of %s at commit %s, with %s's pin, is %s", name, shortCommit(res.SyncedCommit), svc, id)); err != nil {
			return out, err
		}
		target, res.DigestTo, out.DigestTo = id, id, id
	}

	h, err := s.hostFor(ctx, p, t, res, u, spec)
	if err != nil {
		return out, err
	}
	prev, err := h.UnitText(ctx, name)
	if err != nil {
		return out, err
	}
	a := &act{Action: action, Name: name, Result: res, Unit: u, Prev: prev, OldImage: oldImage, Target: target, spec: spec}
	return s.apply(ctx, h, p, out, a)
}

// deployTail ends a deploy or a rollback once its apply step answered.
func (s *Service) deployTail(ctx context.Context, h Host, p *journal.Progress, out *journal.Outcome, a *act, applied *Applied, policy string, retried bool, applyErr error) (*journal.Outcome, error) {
	res, t, u, action, name, target, oldImage, prev := a.Result, &a.Result.Phases, a.Unit, a.Action, a.Name, a.Target, a.OldImage, a.Prev
	if err := unknownStep(applyErr, action, name, res.Node); err != nil {
		return out, err
	}
	if applyErr == nil && applied.Probe.OK {
		res.Running = fmt.Sprintf("%s runs %s (pid %d).", name, target, applied.Pid)
		to := short(target)
		if res.ComposeService != "" {
			d, _ := artifact.ParseDigest(res.ComposeImageTo)
			to = fmt.Sprintf("%s (Compose service %s at %s)", short(target), res.ComposeService, short(d))
		}
		out.Message = fmt.Sprintf("%s %s to %s: probe passed; %s", action, name, to, res.Running)
		if retried {
			out.Message = fmt.Sprintf("%s %s to %s: the first probe failed and the retry passed (retry-once); %s", action, name, to, res.Running)
		}
		id, hash := u.ID, u.ContentHash
		out.ApplyTx = record(id, "applied", &hash, &target, res.Node)
		return out, nil
	}
	if ctx.Err() != nil {
		return out, ctx.Err() // interrupted: the outcome is unknown, nothing is undone
	}
	what := ""
	if applyErr != nil {
		what = applyErr.Error()
	} else {
		what = "its probe failed: " + lastProbe(res).Sentence
		if retried {
			what = "its probe failed, and again on its retry: " + lastProbe(res).Sentence
		}
	}
	if applyErr != nil || policy == servicespec.OnProbeFailureRollback {
		return s.undo(ctx, h, p, t, out, res, u, action, name, target, oldImage, prev, what)
	}
	head := fmt.Sprintf("%s of %s to %s failed: %s.", upperFirst(action), name, target, trimDot(what))
	tail := fmt.Sprintf("The pin stays in Git; deploy again, or roll back with `sluice rollback %s`.", name)
	return s.keepFailure(ctx, h, p, t, out, res, u, policy, name, target, head, tail)
}

// notePolicy records the health rollout policy the run runs under: on its
// receipt and in an event.
func (s *Service) notePolicy(ctx context.Context, p *journal.Progress, res *Result, spec *servicespec.Spec) {
	from := "the default for " + res.Action
	if spec.OnProbeFailure != "" {
		res.OnProbeFailure, from = spec.OnProbeFailure, "spec.onProbeFailure"
	}
	p.Info(ctx, fmt.Sprintf("on a failed probe: %s (%s)", res.OnProbeFailure, from), &OnProbeFailureEvent{Kind: EventOnProbeFailure, OnProbeFailure: res.OnProbeFailure})
}

// lastProbe is the probe that decided: the retry's, if there was one.
func lastProbe(res *Result) *ProbeReport {
	if res.Retry != nil && res.Retry.Probe != nil {
		return res.Retry.Probe
	}
	return res.Applied.Probe
}

// retryOnce probes the service a second time, for retry-once. A process
// that still runs is probed again as it is, not restarted: a slow start
// gets the time it needs. One that exited is started again first. It
// reports whether the second probe passed.
func (s *Service) retryOnce(ctx context.Context, h Host, p *journal.Progress, t *journal.Phases, res *Result, req hoststep.ApplyRequest) bool {
	r, err := h.Reprobe(ctx, p, t, req)
	switch {
	case err != nil:
		p.Error(ctx, "retry-once: "+err.Error(), nil)
		return false
	case r.Restarted:
		res.Retry = r.Applied
	default:
		a := *res.Applied
		a.Pid, a.Probe, a.Alive = r.Applied.Pid, r.Applied.Probe, r.Applied.Alive
		res.Retry = &a
	}
	if res.Retry.Probe.OK {
		p.Info(ctx, "retry-once: the retry's probe passed: "+res.Retry.Probe.Sentence, nil)
	} else {
		p.Error(ctx, "retry-once: the retry's probe failed: "+res.Retry.Probe.Sentence, nil)
	}
	return res.Retry.Probe.OK
}

// keepFailure ends a run whose probe failed under stop, pause or observe:
// head says what failed and tail what to do next.
func (s *Service) keepFailure(ctx context.Context, h Host, p *journal.Progress, t *journal.Phases, out *journal.Outcome, res *Result, u *db.Unit, policy, name, digest, head, tail string) (*journal.Outcome, error) {
	last := res.Applied
	if res.Retry != nil {
		last = res.Retry
	}
	var running *string
	if last.Alive {
		running = &digest
	}
	switch policy {
	case servicespec.OnProbeFailureObserve:
		if last.Alive {
			res.Running = fmt.Sprintf("%s runs %s (pid %d), unhealthy: under onProbeFailure observe it was left running and the run counts as succeeded.", name, digest, last.Pid)
		} else {
			res.Running = fmt.Sprintf("Nothing runs: %s's process has exited; under onProbeFailure observe the run counts as succeeded.", name)
		}
		p.Warn(ctx, "observe: the probe failed and nothing was done about it: "+last.Probe.Sentence, &ProbeEvent{Kind: EventProbe, Probe: last.Probe})
		out.Message = fmt.Sprintf("%s %s to %s: the probe failed (%s), observed only; %s", res.Action, name, short(digest), trimDot(last.Probe.Sentence), res.Running)
		hash := u.ContentHash
		out.ApplyTx = record(u.ID, "applied", &hash, running, res.Node)
		return out, nil
	case servicespec.OnProbeFailurePause:
		if last.Alive {
			res.Running = fmt.Sprintf("%s runs %s (pid %d) but is not healthy; it was left as it is.", name, digest, last.Pid)
		} else {
			res.Running = fmt.Sprintf("Nothing runs: %s's process has exited.", name)
		}
		rec := record(u.ID, "failed", nil, running, res.Node)
		runID, reason := p.RunID(), trimDot(head)
		out.ApplyTx = func(ctx context.Context, tx pgx.Tx) error {
			if err := rec(ctx, tx); err != nil {
				return err
			}
			return db.New(tx).ServicePauseInsert(ctx, &db.ServicePauseInsertParams{Service: name, RunID: runID, Reason: reason})
		}
		return out, fmt.Errorf("%s Under onProbeFailure pause, nothing was undone and the queue of %s is paused: its later actions wait until an operator resumes it (`sluice resume-service %s`). %s", head, name, name, res.Running)
	default: // stop
		_ = h.Stop(ctx, p, t, name)
		res.Running = "Nothing runs."
		out.ApplyTx = record(u.ID, "failed", nil, nil, res.Node)
		return out, fmt.Errorf("%s Under onProbeFailure stop, the process was stopped: %s %s", head, res.Running, tail)
	}
}

// undo reverts a failed deploy: it pushes a revert of the pin, restores the
// unit that ran before and probes it, and returns the failure.
func (s *Service) undo(ctx context.Context, h Host, p *journal.Progress, t *journal.Phases, out *journal.Outcome, res *Result, u *db.Unit, action, name, target, oldImage string, prev []byte, what string) (*journal.Outcome, error) {
	// The pin the deploy moved: the image's, or one Compose service's (to
	// its image's digest; target is then the project's identity).
	path, moved, pinText, whose := imagePath, target, target, name
	rmsg := fmt.Sprintf("revert %s %s to %s: %s\n\nRun %s.", action, name, target, truncate(what, 200), p.RunID())
	if svc := res.ComposeService; svc != "" {
		moved, _ = artifact.ParseDigest(res.ComposeImageTo)
		path, pinText, whose = composeImagePath(svc), svc+" to "+moved, "Compose service "+svc+" of "+name
		rmsg = fmt.Sprintf("revert %s %s of %s to %s: %s\n\nRun %s.", action, name, svc, moved, truncate(what, 200), p.RunID())
	}
	var revert *gitsync.PushResult
	revertErr := t.Do("revert", func() error {
		var err error
		revert, err = s.GitOps.CommitFile(ctx, u.SourceID, u.Path, func(old []byte) ([]byte, error) {
			img, err := unit.GetString(old, path)
			if err != nil {
				return nil, err
			}
			if d, _ := artifact.ParseDigest(img); d != moved {
				return old, nil // someone re-pinned it meanwhile: theirs stands
			}
			return unit.SetString(old, path, oldImage)
		}, rmsg)
		return err
	})
	revertText := ""
	switch {
	case errors.Is(revertErr, gitsync.ErrNoChange):
		revertText = "The pin had already moved on in Git, so no revert was pushed"
	case revertErr != nil:
		revertText = "Reverting the pin failed (" + revertErr.Error() + "), so Git still pins " + pinText + "; revert it by hand"
		p.Error(ctx, revertText, nil)
	default:
		res.RevertCommit = revert.Commit
		revertText = "Pushed revert commit " + shortCommit(revert.Commit)
		p.Info(ctx, fmt.Sprintf("pushed commit %s reverting the pin of %s to %s", shortCommit(revert.Commit), whose, oldImage), nil)
		if _, _, err := s.syncService(ctx, p, t, "sync-revert", name, res); err != nil {
			p.Warn(ctx, "sync after the revert failed: "+err.Error(), nil)
		}
	}

	restoreText, running := s.restore(ctx, h, p, t, res, name, res.DigestFrom, prev)
	res.Running = upperFirst(restoreText) + "."
	out.ApplyTx = record(u.ID, "failed", nil, running, res.Node)
	return out, fmt.Errorf("%s of %s to %s failed: %s. %s; %s.", upperFirst(action), name, target, trimDot(what), revertText, restoreText)
}

// restore starts prev, the rendered unit that ran before (running artifact
// digest), again as it was (under the runtime that reads it) and probes it
// with the probe Git holds now (nil prev: stops the service). It returns a
// clause on what runs now and the digest it left running.
func (s *Service) restore(ctx context.Context, h Host, p *journal.Progress, t *journal.Phases, res *Result, name, digest string, prev []byte) (string, *string) {
	var running *string
	restoreText := ""
	if prev == nil {
		_ = h.Stop(ctx, p, t, name)
		restoreText = fmt.Sprintf("no unit of %s ran before, so it was stopped and nothing runs now", name)
	} else {
		// The probe is the one Git holds now, after the revert.
		var pr *servicespec.Probe
		timeout := servicespec.DefaultProbeTimeoutSec
		var values map[string]hoststep.SecretValue
		var secretErr error
		keepsData := false
		if u, spec, err := getTx(ctx, db.New(s.Pool), name); err == nil {
			pr, timeout = spec.Probe, spec.ProbeTimeoutSec()
			values, secretErr = s.restoreSecrets(ctx, u, prev)
			keepsData = spec.Runtime == servicespec.RuntimeCompose
		}

		var restored *hoststep.Applied
		err := secretErr
		if err == nil {
			restored, err = h.Apply(ctx, p, t, hoststep.ApplyRequest{
				Manifest: render.Manifest{Service: name, ArtifactDigest: digest}, Restore: prev,
				Probe: pr, ProbeTimeoutSec: timeout, Label: "restore-", Secrets: values,
			})
		}
		res.Restored = restored
		switch {
		case err != nil:
			restoreText = fmt.Sprintf("restoring the previous unit failed (%s), so nothing healthy runs", err)
		case restored.Probe.OK:
			d := restored.Digest
			running = &d
			restoreText = fmt.Sprintf("%s runs the previous unit again, %s (pid %d), and it probes healthy", name, d, restored.Pid)
		default:
			restoreText = fmt.Sprintf("the previous unit, %s, was restarted but failed its probe too (%s), so nothing healthy runs", restored.Digest, restored.Probe.Sentence)
			if restored.Alive {
				d := restored.Digest
				running = &d
			}
		}
		if keepsData {
			// A generation is files and images; what the project wrote
			// is its own.
			restoreText += "; its named volumes and bound data were neither restored nor removed"
		}
	}
	return restoreText, running
}

// Converge is the converge action's body: apply what the branch holds, with
// no commit. A failed probe is handled by the service's health rollout
// policy, stop by default (no rollback).
func (s *Service) Converge(ctx context.Context, p *journal.Progress, args ConvergeArgs) (*journal.Outcome, error) {
	name := args.Service
	res := &Result{Service: name, Action: ActionConverge, OnProbeFailure: servicespec.OnProbeFailureStop, Phases: journal.Phases{}}
	t := &res.Phases
	out := &journal.Outcome{Result: res}
	u, spec, err := s.syncService(ctx, p, t, "sync", name, res)
	if err != nil {
		return out, err
	}
	s.notePolicy(ctx, p, res, spec)
	out.Commit = res.SyncedCommit
	digest, from := spec.Digest(), deref(u.RunningDigest)
	res.DigestFrom, res.DigestTo = from, digest
	out.DigestFrom, out.DigestTo = from, digest
	if deref(p.Run().DigestTo) != digest || deref(p.Run().DigestFrom) != from {
		why := fmt.Sprintf("the pin moved while this converge waited: it was asked for %s and applies %s", orNone(deref(p.Run().DigestTo)), digest)
		if deref(p.Run().DigestTo) == digest {
			why = fmt.Sprintf("what runs changed while this converge waited: it now replaces %s", orNone(from))
		}
		if err := p.SetDigests(ctx, from, digest, why); err != nil {
			return out, err
		}
	}
	if err := s.requireArtifact(ctx, spec, digest); err != nil {
		return out, err
	}
	h, err := s.hostFor(ctx, p, t, res, u, spec)
	if err != nil {
		return out, err
	}
	prev, err := h.UnitText(ctx, name)
	if err != nil {
		return out, err
	}
	a := &act{Action: ActionConverge, Name: name, Result: res, Unit: u, Prev: prev, Target: digest, spec: spec}
	return s.apply(ctx, h, p, out, a)
}

// convergeTail ends a converge once its apply step answered.
func (s *Service) convergeTail(ctx context.Context, h Host, p *journal.Progress, out *journal.Outcome, a *act, applied *Applied, policy string, retried bool, applyErr error) (*journal.Outcome, error) {
	res, t, u, name, digest, prev := a.Result, &a.Result.Phases, a.Unit, a.Name, a.Target, a.Prev
	if err := unknownStep(applyErr, ActionConverge, name, res.Node); err != nil {
		return out, err
	}
	if applyErr == nil && applied.Probe.OK {
		res.Running = fmt.Sprintf("%s runs %s (pid %d).", name, digest, applied.Pid)
		out.Message = fmt.Sprintf("converged %s at commit %s: probe passed; %s", name, shortCommit(res.SyncedCommit), res.Running)
		if retried {
			out.Message = fmt.Sprintf("converged %s at commit %s: the first probe failed and the retry passed (retry-once); %s", name, shortCommit(res.SyncedCommit), res.Running)
		}
		hash := u.ContentHash
		out.ApplyTx = record(u.ID, "applied", &hash, &digest, res.Node)
		return out, nil
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	next := fmt.Sprintf("Fix %s in Git and converge again, or roll back with `sluice rollback %s`.", name, name)
	if applyErr != nil {
		// It stopped before a probe: whatever ran may still run.
		if in, err := h.Inspect(ctx, hoststep.InspectRequest{Name: name}); err == nil && in.Running {
			res.Running = fmt.Sprintf("%s still runs as pid %d.", name, in.Pid)
			out.ApplyTx = record(u.ID, "failed", nil, u.RunningDigest, res.Node)
		} else {
			res.Running = "Nothing runs."
			out.ApplyTx = record(u.ID, "failed", nil, nil, res.Node)
		}
		return out, fmt.Errorf("Converge of %s failed before its probe: %s. No rollback was made; %s %s", name, trimDot(applyErr.Error()), res.Running, next)
	}
	sentence := lastProbe(res).Sentence
	if retried {
		sentence = "its probe failed, and again on its retry: " + sentence
	}
	if policy == servicespec.OnProbeFailureRollback {
		restoreText, running := s.restore(ctx, h, p, t, res, name, res.DigestFrom, prev)
		res.Running = upperFirst(restoreText) + "."
		out.ApplyTx = record(u.ID, "failed", nil, running, res.Node)
		return out, fmt.Errorf("Converge of %s to %s failed: %s Under onProbeFailure rollback, the unit rendered before was restored (a converge commits nothing, so Git is unchanged): %s %s", name, digest, sentence, res.Running, next)
	}
	head := fmt.Sprintf("Converge of %s to %s failed: %s", name, digest, sentence)
	return s.keepFailure(ctx, h, p, t, out, res, u, policy, name, digest, head, "No rollback was made. "+next)
}

// unknownStep returns the error that ends a run unknown when the host step
// err is one whose outcome nobody can tell (the node's agent went silent):
// nothing is undone and the inventory is left as it was. nil otherwise.
func unknownStep(err error, action, name, node string) error {
	var u *journal.UnknownError
	if !errors.As(err, &u) {
		return nil
	}
	return journal.Unknown(fmt.Errorf("%s of %s: %w. Its outcome is unknown, and nothing was undone, since the step may have happened; what runs on node %s shows in its next report, and a converge makes it certain", upperFirst(action), name, u.Err, node))
}

// record writes a finished action's effect on the service's unit, in the
// transaction of its receipt: its status, what was applied, what runs and
// on which node ("" when nothing runs).
func record(id uuid.UUID, status string, appliedHash, running *string, node string) func(context.Context, pgx.Tx) error {
	var on *string
	if running != nil && node != "" {
		on = &node
	}
	return func(ctx context.Context, tx pgx.Tx) error {
		return db.New(tx).UnitRecordOutcome(ctx, &db.UnitRecordOutcomeParams{
			ID: id, Status: status, AppliedHash: appliedHash, RunningDigest: running, RunningNode: on,
		})
	}
}

// applyRequest is the host step that applies spec as service name.
func applyRequest(spec *servicespec.Spec, name, label string) hoststep.ApplyRequest {
	return ApplyRequest(spec, name, label)
}

// ApplyRequest is the host step that applies spec as service name, under
// spec's runtime; label prefixes its phases.
func ApplyRequest(spec *servicespec.Spec, name, label string) hoststep.ApplyRequest {
	return hoststep.ApplyRequest{
		Manifest: spec.Manifest(name), Runtime: spec.Runtime, Systemd: spec.Systemd, Container: containerOf(spec, name), Compose: spec.Project(),
		Probe: spec.Probe, ProbeTimeoutSec: spec.ProbeTimeoutSec(), Label: label,
	}
}

// containerOf is what the container runtime adds to spec's manifest; nil
// for another runtime.
func containerOf(spec *servicespec.Spec, name string) *hoststep.Container {
	if spec.Runtime != servicespec.RuntimeContainer {
		return nil
	}
	out := &hoststep.Container{Image: spec.PulledImage()}
	if !strings.Contains(out.Image, "@") {
		out.Image = "sluice.local/" + name + "@" + out.Image // an archive pinned by its digest alone
	}
	if r := spec.Resolved; r != nil && r.Index {
		for _, p := range r.Platforms {
			out.Platforms = append(out.Platforms, hoststep.ContainerPlatform{Platform: p.Platform, Digest: p.Digest})
		}
	}
	c := spec.Container
	if c == nil {
		return out
	}
	out.Entrypoint, out.Restart, out.Network, out.Archive = c.Entrypoint, c.Restart, c.Network, c.Archive
	// The powers over the host it asks for, which its source allows (sync
	// and the action checked): the runtime refuses any the request does
	// not name.
	out.Privileged, out.CapAdd, out.Devices, out.PID = c.Privileged, slices.Clone(c.CapAdd), slices.Clone(c.Devices), c.PID
	for _, p := range spec.Powers() {
		out.Powers = append(out.Powers, p.Name)
	}
	out.Memory, out.NanoCPUs = c.MemoryBytes(), c.NanoCPUs()
	// The request's own copies: the runtime fills in their defaults.
	out.Volumes, out.Ports = slices.Clone(c.Volumes), slices.Clone(c.Ports)
	if h := c.Healthcheck; h != nil {
		hc := *h
		out.Healthcheck = &hc
	}
	return out
}

// underPolicy takes the answer of the service's apply step (req) and,
// under retry-once, probes once more when the probe failed. It returns what
// runs, the policy that now decides a failure (the action's fallback when
// the retry failed too) and whether a retry was made.
func (s *Service) underPolicy(ctx context.Context, h Host, p *journal.Progress, a *act, req hoststep.ApplyRequest, applied *Applied, applyErr error) (*Applied, string, bool, error) {
	res, t := a.Result, &a.Result.Phases
	res.Applied = applied
	policy := res.OnProbeFailure
	if applyErr != nil || applied.Probe.OK || policy != servicespec.OnProbeFailureRetryOnce || ctx.Err() != nil {
		return applied, policy, false, applyErr
	}
	if s.retryOnce(ctx, h, p, t, res, req) {
		return res.Retry, policy, true, nil
	}
	what, fallback := "a deploy", servicespec.OnProbeFailureRollback
	if a.Action == ActionConverge {
		what, fallback = "a converge", servicespec.OnProbeFailureStop
	}
	p.Warn(ctx, fmt.Sprintf("the retry failed too; under retry-once, %s falls back to its default, %s", what, fallback), nil)
	return applied, fallback, true, nil
}

// rollbackProject runs a Compose project's generation target again, as
// the run that applied it left it (its unit text: files, override, pins),
// without a commit: Git keeps what it holds, which the service's status
// shows as ahead of what runs until a converge applies it. A failed probe
// restores the generation that ran before. Named volumes and bound data
// are neither restored nor removed.
func (s *Service) rollbackProject(ctx context.Context, p *journal.Progress, out *journal.Outcome, u *db.Unit, spec *servicespec.Spec, target string) (*journal.Outcome, error) {
	res := out.Result.(*Result)
	t, name := &res.Phases, u.Name
	rendered, err := db.New(s.Pool).ServiceAppliedUnit(ctx, &db.ServiceAppliedUnitParams{Target: name, Actions: Actions, Digest: target})
	if errors.Is(err, pgx.ErrNoRows) || err == nil && rendered == "" {
		return out, errs.Errorf(errs.Conflict, "No receipt of %s holds the unit that ran generation %s, so it cannot be run again; nothing was changed.", name, target)
	}
	if err != nil {
		return out, fmt.Errorf("find the unit of generation %s of %s: %w", target, name, err)
	}
	from := deref(u.RunningDigest)
	res.DigestFrom, res.DigestTo = from, target
	out.DigestFrom, out.DigestTo = from, target
	if deref(p.Run().DigestFrom) != from || deref(p.Run().DigestTo) != target {
		if err := p.SetDigests(ctx, from, target, fmt.Sprintf("at its turn, %s runs %s and goes back to %s", name, orNone(from), target)); err != nil {
			return out, err
		}
	}
	h, err := s.hostFor(ctx, p, t, res, u, spec)
	if err != nil {
		return out, err
	}
	prev, err := h.UnitText(ctx, name)
	if err != nil {
		return out, err
	}
	values, err := s.restoreSecrets(ctx, u, []byte(rendered))
	if err != nil {
		return out, err
	}
	p.Info(ctx, fmt.Sprintf("running generation %s of %s again, as its last healthy run left it; Git is not changed", short(target), name), nil)
	applied, err := h.Apply(ctx, p, t, hoststep.ApplyRequest{
		Manifest: render.Manifest{Service: name, ArtifactDigest: target}, Restore: []byte(rendered),
		Probe: spec.Probe, ProbeTimeoutSec: spec.ProbeTimeoutSec(), Secrets: values,
	})
	res.Applied = applied
	if err := unknownStep(err, ActionRollback, name, res.Node); err != nil {
		return out, err
	}
	const kept = "Its named volumes and bound data were neither restored nor removed."
	if err == nil && applied.Probe.OK {
		res.Running = fmt.Sprintf("%s runs generation %s (pid %d).", name, target, applied.Pid)
		out.Message = fmt.Sprintf("rolled back %s to generation %s: probe passed; %s Git still holds %s, which a converge applies again. %s", name, short(target), res.Running, short(spec.Digest()), kept)
		out.ApplyTx = record(u.ID, "applied", nil, &target, res.Node)
		return out, nil
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	what := ""
	if err != nil {
		what = err.Error()
	} else {
		what = "its probe failed: " + lastProbe(res).Sentence
	}
	restoreText, running := s.restore(ctx, h, p, t, res, name, from, prev)
	res.Running = upperFirst(restoreText) + "."
	out.ApplyTx = record(u.ID, "failed", nil, running, res.Node)
	return out, fmt.Errorf("Rollback of %s to generation %s failed: %s. %s", name, target, trimDot(what), res.Running)
}
