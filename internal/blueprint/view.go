package blueprint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/blueprintspec"
	"sluice/internal/services"
	"sluice/internal/servicespec"
)

// BlueprintView is a Blueprint as the API shows it: what Git holds, the placement
// approved and the plan now, and one sentence that says what is true and
// what waits for an operator.
type BlueprintView struct {
	Name            string `json:"name"`
	Path            string `json:"path"`
	Generation      string `json:"generation"`
	Digest          string `json:"digest"`
	Selector        string `json:"selector"`
	PlacementPolicy string `json:"placementPolicy" enum:"operator,bounded-auto"`
	RolloutPolicy   string `json:"rolloutPolicy" enum:"manual,automatic"`
	DriftMode       string `json:"driftMode" enum:"observe,suggest,enforce"`
	Stateful        bool   `json:"stateful"`
	StatefulWhy     string `json:"statefulWhy"`
	// Placement is the approval now in force; nil when none was made.
	Placement *PlacementGrant `json:"placement,omitempty"`
	// projectErr is why a Compose template's files could not be read;
	// Digest is then "".
	projectErr error
	Plan       *PlacementPlan `json:"plan"`
	// Decline is bounded-auto's newest decline of this plan, with when it
	// was recorded.
	Decline *PlacementDecline `json:"decline,omitempty"`
	// Rollout is the newest rollout generation, with each node's answer;
	// History the newest ten, newest first, each with its state.
	Rollout *RolloutView     `json:"rollout,omitempty"`
	History []RolloutSummary `json:"history"`
	// Nodes is a row per node it is placed on, holds a copy on, or was
	// withdrawn from.
	Nodes []NodeRow `json:"nodes"`
	// Status is the answer / path / evidence block; the API renders it in
	// the shared status shape.
	Status *BlueprintStatus `json:"-"`
	// Answer says in sentences what is true and what waits.
	Answer string `json:"answer"`
	// Actions says which rollout actions can do something now, and why
	// not the others.
	Actions *Actions `json:"actions"`
}

// RolloutSkipped is a node an operator left out of a rollout.
type RolloutSkipped struct {
	Node   string    `json:"node"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// RolloutPause is who paused a rollout, when and why.
type RolloutPause struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// RolloutView is a rollout generation and how its nodes answered.
type RolloutView struct {
	ID uuid.UUID `json:"id"`
	// Kind is rollout, or rollback (of RollsBack, over Scope).
	Kind           string     `json:"kind" enum:"rollout,rollback"`
	RollsBack      *uuid.UUID `json:"rollsBack,omitempty"`
	Scope          string     `json:"scope" enum:"all,failed"`
	OnProbeFailure string     `json:"onProbeFailure" enum:"stop,rollback,pause,retry-once,observe"`
	Generation     string     `json:"generation"`
	Digest         string     `json:"digest"`
	Nodes          []string   `json:"nodes"`
	AuthorizedBy   string     `json:"authorizedBy"`
	Policy         string     `json:"policy" enum:"manual,automatic"`
	At             time.Time  `json:"at"`
	// AuthorizeRunID is the authorization's receipt; State the rollout's
	// state: its newest run's (queued, running, succeeded, failed,
	// unknown, cancelled), or paused.
	AuthorizeRunID uuid.UUID     `json:"authorizeRunId"`
	State          string        `json:"state" enum:"queued,running,succeeded,failed,unknown,cancelled,paused,superseded,rolled back"`
	RunID          *uuid.UUID    `json:"runId,omitempty"`
	Pause          *RolloutPause `json:"pause,omitempty"`
	// Skipped are the nodes an operator left out of it, and why.
	Skipped []RolloutSkipped `json:"skipped"`
	Error   string           `json:"error,omitempty"`
	Answers []NodeAnswer     `json:"answers"`

	row *db.Rollout // the rollout's row, for what the view derives from it
}

// NodeAnswer is one node's answer to a rollout.
type NodeAnswer struct {
	Node   string    `json:"node"`
	State  string    `json:"state" enum:"active,failed,unknown,rolled_back,unhealthy"`
	Pid    int       `json:"pid,omitempty"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// PlacementGrant is an approval: what, who, under which policy line, when.
type PlacementGrant struct {
	Nodes       []string  `json:"nodes"`
	ApprovedBy  string    `json:"approvedBy"`
	Policy      string    `json:"policy" enum:"operator,bounded-auto"`
	Generation  string    `json:"generation"`
	Fingerprint string    `json:"fingerprint"`
	At          time.Time `json:"at"`
	RunID       uuid.UUID `json:"runId"`
}

// PlacementDecline is a recorded decline.
type PlacementDecline struct {
	Reason      string    `json:"reason"`
	RecordedAt  time.Time `json:"recordedAt"`
	Fingerprint string    `json:"fingerprint"`
}

// Get returns Blueprint name's view.
func (s *Service) Get(ctx context.Context, name string) (*BlueprintView, error) {
	q := db.New(s.Pool)
	u, spec, err := blueprintOf(ctx, q, name)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, q, u, spec)
}

// List returns every active Blueprint's view; one whose spec no longer
// reads is left out (sync keeps such units out of the inventory).
func (s *Service) List(ctx context.Context) ([]*BlueprintView, error) {
	out, _, err := s.ListAfter(ctx, "", -1)
	return out, err
}

// ListAfter is a page of List: up to limit Blueprints named after after
// (every one when limit is negative), and whether more follow. Only the
// page's views are read.
func (s *Service) ListAfter(ctx context.Context, after string, limit int) ([]*BlueprintView, bool, error) {
	q := db.New(s.Pool)
	units, err := q.BlueprintListAfter(ctx, after)
	if err != nil {
		return nil, false, fmt.Errorf("list blueprints: %w", err)
	}
	out := []*BlueprintView{}
	for _, u := range units {
		spec, err := blueprintspec.Parse(u.Name, u.Content)
		if err != nil {
			continue
		}
		if limit >= 0 && len(out) == limit {
			return out, true, nil
		}
		v, err := s.view(ctx, q, u, spec)
		if err != nil {
			return nil, false, err
		}
		out = append(out, v)
	}
	return out, false, nil
}

func (s *Service) view(ctx context.Context, q *db.Queries, u *db.Unit, spec *blueprintspec.Spec) (*BlueprintView, error) {
	p, err := s.plan(ctx, q, u, spec)
	if err != nil {
		return nil, err
	}
	// A Compose template's digest is its files' identity, and whether it
	// keeps data is in its files: read them at the commit in force. A
	// project that cannot be read leaves the digest unknown (""), which
	// nothing compares as newer.
	var projectErr error
	if spec.Service.Runtime == servicespec.RuntimeCompose && s.GitOps != nil {
		projectErr = services.ReadProject(ctx, s.GitOps, u, spec.Service)
	}
	stateful, why := spec.IsStateful()
	v := &BlueprintView{
		Name: u.Name, Path: u.Path, Generation: u.ContentHash, Digest: spec.Service.Digest(),
		Selector: spec.Selector.String(), PlacementPolicy: spec.Placement(), RolloutPolicy: spec.Rollout(), DriftMode: spec.Drift(),
		Stateful: stateful, StatefulWhy: why, Plan: p, projectErr: projectErr,
	}
	if c := p.Current; c != nil {
		v.Placement = &PlacementGrant{Nodes: c.Nodes, ApprovedBy: c.ApprovedBy, Policy: c.Policy, Generation: c.Generation, Fingerprint: c.Fingerprint, At: c.CreatedAt, RunID: c.RunID}
	}
	d, err := q.DeclineGet(ctx, u.ID)
	switch {
	case err == nil && d.Fingerprint == p.Fingerprint:
		v.Decline = &PlacementDecline{Reason: d.Reason, RecordedAt: d.RecordedAt, Fingerprint: d.Fingerprint}
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("decline of %s: %w", u.Name, err)
	}
	if v.Rollout, err = s.rolloutView(ctx, q, u); err != nil {
		return nil, err
	}
	if v.History, err = history(ctx, q, u); err != nil {
		return nil, err
	}
	if err := s.status(ctx, q, u, spec, v); err != nil {
		return nil, err
	}
	if v.Actions, err = s.actions(ctx, q, u, spec, v); err != nil {
		return nil, err
	}
	v.Answer = answer(v)
	return v, nil
}

// answer is the one sentence: the placement stage's, first what waits.
func answer(v *BlueprintView) string {
	p := v.Plan
	var b strings.Builder
	switch {
	case p.Change:
		fmt.Fprintf(&b, "Placement waits for an operator: the plan would %s (fingerprint %s)", p.Describe(), p.Fingerprint)
		switch {
		case v.Decline != nil:
			fmt.Fprintf(&b, "; bounded-auto declined it at %s: %s", v.Decline.RecordedAt.UTC().Format(time.RFC3339), v.Decline.Reason)
		case v.PlacementPolicy == blueprintspec.PlacementOperator:
			b.WriteString("; the placement policy is operator")
		}
		fmt.Fprintf(&b, ". Approve it: `sluice placement approve %s`.", v.Name)
	case v.Placement == nil:
		fmt.Fprintf(&b, "Nothing to place: no node is selected (%s) and Ready.", v.Selector)
	default:
		fmt.Fprintf(&b, "Placement approved for %s by %s (%s policy, %s).", orNone(v.Placement.Nodes), v.Placement.ApprovedBy,
			v.Placement.Policy, v.Placement.At.UTC().Format(time.RFC3339))
	}
	for _, h := range p.Held {
		fmt.Fprintf(&b, " Node %s is selected but held back (%s).", h.Node, strings.TrimSuffix(h.Reason, "."))
	}
	for _, h := range p.Unready {
		if slices.Contains(p.Remove, h.Node) {
			continue // the plan's own sentence names it
		}
		fmt.Fprintf(&b, " Node %s stays placed while %s.", h.Node, strings.ToLower(strings.TrimSuffix(h.Reason, ".")))
	}
	switch r := v.Rollout; {
	case r == nil:
		b.WriteString(" No rollout was authorized: nothing of it is deployed.")
	default:
		fmt.Fprintf(&b, " Rollout %s (generation %s, artifact %s, authorized by %s) is %s", r.ID, short(r.Generation), short(r.Digest), r.AuthorizedBy, r.State)
		var parts []string
		for _, a := range r.Answers {
			parts = append(parts, a.Node+" "+a.State)
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(parts, ", "))
		}
		if r.Error != "" {
			fmt.Fprintf(&b, ". %s", strings.TrimSuffix(r.Error, "."))
		}
		b.WriteString(".")
		if r.Generation != v.Generation || v.Digest != "" && r.Digest != v.Digest {
			fmt.Fprintf(&b, " Git holds a newer generation (%s) that no rollout was authorized for.", short(v.Generation))
		}
	}
	return b.String()
}

// rolloutView reads u's newest rollout and its nodes' answers.
func (s *Service) rolloutView(ctx context.Context, q *db.Queries, u *db.Unit) (*RolloutView, error) {
	r, err := q.RolloutLatest(ctx, u.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rollout of %s: %w", u.Name, err)
	}
	rv := &RolloutView{ID: r.ID, Kind: r.Kind, RollsBack: r.RollsBack, Scope: r.Scope, OnProbeFailure: r.OnProbeFailure,
		Generation: r.Generation, Digest: r.Digest, Nodes: r.Nodes, AuthorizedBy: r.AuthorizedBy,
		Policy: r.Policy, At: r.CreatedAt, AuthorizeRunID: r.RunID, State: "queued", Answers: []NodeAnswer{}, row: r}
	run, err := runOf(ctx, q, r)
	if err != nil {
		return nil, err
	}
	if run != nil {
		rv.RunID = &run.ID
		if run.Error != nil {
			rv.Error = *run.Error
		}
	}
	pause, err := q.RolloutPauseGet(ctx, r.ID)
	switch {
	case err == nil:
		rv.Pause = &RolloutPause{By: pause.PausedBy, Reason: pause.Reason, At: pause.At}
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, err
	}
	rv.State = rolloutState(r, run, rv.Pause != nil, nil)
	skips, err := q.RolloutSkips(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	rv.Skipped = []RolloutSkipped{}
	for _, sk := range skips {
		rv.Skipped = append(rv.Skipped, RolloutSkipped{Node: sk.Node, By: sk.SkippedBy, Reason: sk.Reason, At: sk.At})
	}
	nodes, err := q.RolloutNodes(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		a := NodeAnswer{Node: n.Node, State: n.State, Reason: n.Reason, At: n.At}
		if n.Pid != nil {
			a.Pid = int(*n.Pid)
		}
		rv.Answers = append(rv.Answers, a)
	}
	return rv, nil
}
