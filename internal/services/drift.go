package services

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sluice/db"
	"sluice/internal/journal"
	"sluice/internal/servicespec"
)

// ActionDriftCheck is a service's drift check.
const ActionDriftCheck = "service_drift_check"

// DriftCheckArgs asks for a drift check of Service; requests join a queued
// one.
type DriftCheckArgs struct {
	journal.Ref
	Service string `json:"service" river:"unique"`
}

// Kind implements river.JobArgs.
func (DriftCheckArgs) Kind() string { return ActionDriftCheck }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DriftCheckArgs) InsertOpts() river.InsertOpts { return insertOpts() }

// driftProbeTimeout bounds the probe of a drift check: it asks whether the
// service answers now, not whether it comes up.
const driftProbeTimeout = 5 * time.Second

// Drift is a service drift check's result, in the vocabulary of
// infrastructure drift: desired_ahead when Git moved past the last apply,
// live_drift when what runs is not what was applied (both can hold; the
// status is then live_drift), in_sync, or unknown with its reason.
type Drift struct {
	Status       string `json:"status"`
	DesiredAhead bool   `json:"desiredAhead"`
	LiveDrift    bool   `json:"liveDrift"`
	Reason       string `json:"reason,omitempty"`
	// Findings are the facts behind the status, each with its proof.
	Findings      []string     `json:"findings"`
	PinnedDigest  string       `json:"pinnedDigest"`
	AppliedDigest string       `json:"appliedDigest,omitempty"`
	AppliedRun    string       `json:"appliedRun,omitempty"`
	Probe         *ProbeReport `json:"probe,omitempty"`
	CheckedAt     time.Time    `json:"checkedAt"`
}

// Drift statuses.
const (
	InSync       = "in_sync"
	DesiredAhead = "desired_ahead"
	LiveDrift    = "live_drift"
	Unknown      = "unknown"
)

// RequestDriftCheck asks for a drift check of service name.
func (s *Service) RequestDriftCheck(ctx context.Context, name, requestedBy string) (*journal.EnqueueResult, error) {
	var res *journal.EnqueueResult
	err := db.WithTx(ctx, s.Pool, func(ctx context.Context, tx pgx.Tx) error {
		if _, _, err := getTx(ctx, db.New(tx), name); err != nil {
			return err
		}
		var err error
		res, err = s.Journal.EnqueueTx(ctx, tx, journal.EnqueueParams{
			Args: &DriftCheckArgs{Service: name}, Target: name, RequestedBy: requestedBy,
		})
		return err
	})
	return res, err
}

// DriftCheck compares what runs with what was applied and with what Git
// holds: the pin against the last applied digest, the unit file on disk
// against the rendered unit of the last succeeded run, and whether the
// process is alive and its probe passes. The check succeeds whatever it
// finds.
func (s *Service) DriftCheck(ctx context.Context, p *journal.Progress, args DriftCheckArgs) (*journal.Outcome, error) {
	name := args.Service
	d := &Drift{Findings: []string{}, CheckedAt: time.Now().UTC()}
	out := &journal.Outcome{Result: d}
	u, spec, err := getTx(ctx, db.New(s.Pool), name)
	if err != nil {
		return out, err
	}
	d.PinnedDigest = spec.Digest()
	d.DesiredAhead = u.LastAppliedHash == nil || *u.LastAppliedHash != u.ContentHash
	if d.DesiredAhead {
		d.Findings = append(d.Findings, fmt.Sprintf("Git is ahead: the unit's content hash %s is not the last applied one (%s).", short(u.ContentHash), orNone(deref(u.LastAppliedHash))))
	}
	run, err := db.New(s.Pool).RunLatestSucceeded(ctx, &db.RunLatestSucceededParams{Target: name, Actions: []string{ActionDeploy, ActionRollback, ActionConverge}})
	if errors.Is(err, pgx.ErrNoRows) {
		d.Status, d.Reason = Unknown, "no action on this service ever succeeded, so nothing applied can be compared; converge it first"
		out.Message = "drift unknown: " + d.Reason
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("find the last applied run of %s: %w", name, err)
	}
	var applied Result
	if err := json.Unmarshal(run.Result, &applied); err != nil || applied.Applied == nil {
		d.Status, d.Reason = Unknown, fmt.Sprintf("the receipt of run %s holds no applied unit", run.ID)
		return out, nil
	}
	d.AppliedDigest, d.AppliedRun = applied.Applied.Digest, run.ID.String()
	if d.PinnedDigest != d.AppliedDigest {
		d.DesiredAhead = true
		d.Findings = append(d.Findings, fmt.Sprintf("Git pins %s; run %s applied %s.", d.PinnedDigest, run.ID, d.AppliedDigest))
	}

	live := func(f string) {
		d.LiveDrift = true
		d.Findings = append(d.Findings, f)
	}
	text, err := s.unitText(name)
	switch {
	case err != nil:
		live("The unit file on disk cannot be read: " + err.Error())
	case text == nil:
		live(fmt.Sprintf("The unit file %s is missing; run %s wrote %s.", s.unitPath(name), run.ID, short(applied.Applied.RenderedHash)))
	default:
		sum := sha256.Sum256(text)
		if h := "sha256:" + hex.EncodeToString(sum[:]); h != applied.Applied.RenderedHash {
			live(fmt.Sprintf("The unit file on disk hashes to %s; run %s wrote %s.", short(h), run.ID, short(applied.Applied.RenderedHash)))
		}
	}
	proc, err := s.Supervisor.Adopt(name)
	if err != nil {
		live(fmt.Sprintf("No process runs: %s.", err))
	} else {
		var pr *servicespec.Probe
		if spec.Probe != nil {
			pr = &servicespec.Probe{HTTP: spec.Probe.HTTP}
		}
		d.Probe = s.probe(ctx, proc, pr, int(driftProbeTimeout/time.Second))
		if !d.Probe.OK {
			live(fmt.Sprintf("The process (pid %d) runs, but its probe fails: %s", proc.Pid(), d.Probe.Sentence))
		} else {
			d.Findings = append(d.Findings, fmt.Sprintf("The process runs as pid %d and its probe passes.", proc.Pid()))
		}
	}
	switch {
	case d.LiveDrift:
		d.Status = LiveDrift
	case d.DesiredAhead:
		d.Status = DesiredAhead
	default:
		d.Status = InSync
	}
	out.Message = fmt.Sprintf("drift check of %s: %s", name, d.Status)
	return out, nil
}
