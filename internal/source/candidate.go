package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/unit"
)

// PlanDigest is a change plan as operators see it: what accepting it makes
// of the inventory, and its fingerprint.
type PlanDigest struct {
	Commit      string         `json:"commit"`
	Fingerprint string         `json:"fingerprint"`
	Created     []string       `json:"created"`
	Updated     []string       `json:"updated"`
	Stale       []string       `json:"stale"`
	Invalid     []unit.Invalid `json:"invalid"`
}

// Candidate is the fetch of a manual or review source that waits for an
// operator.
type Candidate struct {
	SourceID uuid.UUID
	Source   string
	// Policy is the source's policy now; State is "Pending update" (manual)
	// or "Review required" (review, and any other policy the source was
	// changed to since).
	Policy        Policy
	State         string
	CommitMessage string
	// RunID is the run whose fetch made the candidate.
	RunID     *uuid.UUID
	FetchedAt time.Time
	PlanDigest
}

// StoredPlan is what a candidate keeps (source_candidate.plan) so that
// accepting it applies the plan its fetch made, without fetching again. Its
// summary (source_candidate.summary) is the whole PlanDigest, every path
// listed.
type StoredPlan struct {
	// RepoURL, Branch and Path are the settings the fetch used.
	RepoURL string `json:"repo_url"`
	Branch  string `json:"branch"`
	Path    string `json:"path"`
	Commit  string `json:"commit"`
	Message string `json:"message"`
	Full    bool   `json:"full"`
	// Changed is nil for a full walk.
	Changed []string       `json:"changed"`
	Units   []*unit.Unit   `json:"units"`
	Invalid []unit.Invalid `json:"invalid"`
}

// GetCandidate returns the candidate of the source key names; NotFound when
// none waits.
func (s *Service) GetCandidate(ctx context.Context, key string) (*Candidate, error) {
	q := db.New(s.Pool)
	src, err := Find(ctx, q, key)
	if err != nil {
		return nil, err
	}
	row, err := q.SourceCandidateGet(ctx, src.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "No candidate waits for source %s: under policy %s, %s.", src.Name, src.Policy, noCandidateWhy(Policy(src.Policy)))
	}
	if err != nil {
		return nil, fmt.Errorf("get the candidate of %s: %w", src.Name, err)
	}
	out := &Candidate{
		SourceID: src.ID, Source: src.Name, Policy: Policy(src.Policy), State: string(ReviewRequired),
		CommitMessage: row.CommitMessage, RunID: row.RunID, FetchedAt: row.FetchedAt,
	}
	if out.Policy == PolicyManual {
		out.State = string(PendingUpdate)
	}
	if err := json.Unmarshal(row.Summary, &out.PlanDigest); err != nil {
		return nil, fmt.Errorf("decode the candidate of %s: %w", src.Name, err)
	}
	return out, nil
}

func noCandidateWhy(p Policy) string {
	if p.Waits() {
		return "the next sync that finds a change makes one"
	}
	return "syncs apply what they fetch at once"
}

// PendingChange is what a waiting candidate would do to one unit.
type PendingChange struct {
	// Commit is the candidate's commit.
	Commit string
	// Change is "updated" or "stale".
	Change string
}

// PendingChangeOf returns what the candidate waiting on source sourceID
// would do to the unit at path; nil when no candidate waits or it leaves
// the unit alone.
func (s *Service) PendingChangeOf(ctx context.Context, sourceID uuid.UUID, path string) (*PendingChange, error) {
	c, err := db.New(s.Pool).SourceCandidateGet(ctx, sourceID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get the candidate of source %s: %w", sourceID, err)
	}
	var d PlanDigest
	if err := json.Unmarshal(c.Summary, &d); err != nil {
		return nil, fmt.Errorf("decode the candidate of source %s: %w", sourceID, err)
	}
	switch {
	case slices.Contains(d.Updated, path):
		return &PendingChange{Commit: c.GitCommit, Change: "updated"}, nil
	case slices.Contains(d.Stale, path):
		return &PendingChange{Commit: c.GitCommit, Change: "stale"}, nil
	}
	return nil, nil
}
