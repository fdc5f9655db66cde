package httpapi

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/source"
)

// Source is a Git repository sluice syncs units from. The GitOps settings
// are the source named default.
type Source struct {
	ID              uuid.UUID  `json:"id" format:"uuid"`
	Name            string     `json:"name" example:"apps"`
	RepoURL         string     `json:"repoUrl" doc:"The repository. Credentials are shown as ***; send the URL back unchanged to keep them." example:"https://git.example.com/ops/apps.git"`
	Branch          string     `json:"branch" example:"main"`
	Path            string     `json:"path" doc:"The subdirectory holding the units; empty for the whole repository."`
	SyncIntervalSec int        `json:"syncIntervalSec" doc:"Seconds between interval syncs; 0 means manual syncs only." example:"600"`
	Default         bool       `json:"default" doc:"The source the GitOps settings describe (/api/v1/gitops/settings); it cannot be deleted."`
	Policy          string     `json:"policy" enum:"manual,review,auto-write,auto-deploy" doc:"What a sync may do with what it fetches: manual and review keep it as a candidate an operator accepts; auto-write applies it; auto-deploy applies it, then converges changed services and plans (or, with autoApply, applies) changed infrastructure." example:"auto-write"`
	Suspended       bool       `json:"suspended" doc:"A suspended source gets no interval syncs, and manual syncs are refused."`
	SuspendedAt     *time.Time `json:"suspendedAt,omitempty"`
	WebhookSecret   bool       `json:"webhookSecretSet" doc:"The source has a webhook secret, so takes push deliveries at POST /api/v1/webhooks/{source}. The secret is never shown."`
	ContainerPowers []string   `json:"containerPowers" enum:"privileged,cap-add,devices,pid-host,network-host" doc:"The powers over their host that the source's container services may be given; a container asking for another is refused at sync and at each action. None by default." example:"[\"cap-add\"]"`
	CreatedAt       time.Time  `json:"createdAt"`
	UpdatedAt       time.Time  `json:"updatedAt"`
	JournalID       *uuid.UUID `json:"journalId,omitempty" format:"uuid" doc:"In the answer to a change: the change's receipt. Absent when the source is read."`
}

func sourceOut(s *source.Source) Source {
	out := Source{
		ID: s.ID, Name: s.Name, RepoURL: s.RepoURL, Branch: s.Branch, Path: s.Path, SyncIntervalSec: s.SyncIntervalSec,
		Default: s.Default, Policy: string(s.Policy), Suspended: s.SuspendedAt != nil, SuspendedAt: s.SuspendedAt,
		WebhookSecret: s.WebhookSecretSet, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		JournalID: ptrIfSet(s.JournalID), ContainerPowers: s.ContainerPowers,
	}
	if out.ContainerPowers == nil {
		out.ContainerPowers = []string{}
	}
	return out
}

// ptrIfSet is &id, or nil for the zero id.
func ptrIfSet(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// SourceInput creates or changes a source.
type SourceInput struct {
	Name    string `json:"name" maxLength:"63" doc:"1 to 63 lowercase letters, digits, '.', '_' or '-'. A deleted source's name may be used again." example:"apps"`
	RepoURL string `json:"repoUrl" maxLength:"2048" doc:"https, ssh, file:// or a local path. Credentials in the URL are stored apart and shown as ***." example:"https://git.example.com/ops/apps.git"`
	Branch  string `json:"branch,omitempty" maxLength:"255" default:"main" doc:"The branch to track." example:"main"`
	Path    string `json:"path,omitempty" maxLength:"1024" doc:"Optional subdirectory holding the units: relative, no .., not absolute." example:"units"`
	// SyncIntervalSec is a pointer because Huma fills a default into a zero
	// value: an explicit 0 (manual only) must stay 0.
	SyncIntervalSec *int   `json:"syncIntervalSec,omitempty" minimum:"0" maximum:"31536000" default:"600" doc:"Seconds between interval syncs, at most a year (31536000); 0 means manual syncs only. Default 600." example:"600"`
	Policy          string `json:"policy,omitempty" enum:"manual,review,auto-write,auto-deploy" doc:"The source's policy; omitted keeps it (auto-write for a new source). A change withdraws nothing already accepted." example:"manual"`
	// ContainerPowers is a pointer: omitted keeps them, [] allows none.
	ContainerPowers *[]string `json:"containerPowers,omitempty" maxItems:"5" enum:"privileged,cap-add,devices,pid-host,network-host" doc:"The powers over their host that the source's container services may be given: privileged, cap-add, devices, pid-host, network-host. Omitted keeps them (none for a new source); an empty list allows none. A change makes the next sync read every unit again." example:"[\"cap-add\"]"`
	// WebhookSecret is a pointer: omitted keeps the stored secret, "" removes it.
	WebhookSecret *string `json:"webhookSecret,omitempty" maxLength:"256" writeOnly:"true" doc:"The secret the Git host signs push webhooks with (16 to 256 bytes): stored sealed, never shown back. Omitted keeps the stored one; an empty string removes it." example:"3f7c2b0e9a4d4e1f8b6a5c2d7e9f0a1b"`
}

// checkRepoPath refuses a relative repository path over the API: the
// server would resolve it against its own working directory, which no
// client means. (SLUICE_GITOPS_REPO_URL, read where serve starts, may be
// relative.)
func checkRepoPath(repoURL string) error {
	if repoURL == "" || strings.Contains(repoURL, "://") || filepath.IsAbs(repoURL) {
		return nil
	}
	if i := strings.IndexByte(repoURL, ':'); i > 0 && !strings.ContainsRune(repoURL[:i], '/') {
		return nil // scp-like: user@host:path
	}
	return errs.Errorf(errs.Invalid, "Repository %q is a relative path, which the server would resolve against its own working directory; give an absolute path, a file:// URL, or a remote URL.", repoURL)
}

func (in SourceInput) domain() source.Input {
	interval := source.DefaultInterval
	if in.SyncIntervalSec != nil {
		interval = *in.SyncIntervalSec
	}
	return source.Input{Name: in.Name, Policy: source.Policy(in.Policy), ContainerPowers: in.ContainerPowers, SettingsInput: source.SettingsInput{
		RepoURL: in.RepoURL, Branch: in.Branch, Path: in.Path, SyncIntervalSec: interval, WebhookSecret: in.WebhookSecret,
	}}
}

type sourceOutput struct{ Body Source }

type listSourcesOutput struct {
	Body struct {
		Sources []Source `json:"sources" doc:"The sources that are not deleted, by name."`
	}
}

type createSourceInput struct{ Body SourceInput }

type sourceRef struct {
	ID string `path:"id" maxLength:"63" doc:"The source's id or name." example:"apps"`
}

type putSourceInput struct {
	ID   string `path:"id" maxLength:"63" doc:"The source's id or name." example:"apps"`
	Body SourceInput
}

// Candidate is the fetch of a manual or review source that waits for an
// operator: a commit and the change plan accepting it makes.
type Candidate struct {
	SourceID      uuid.UUID     `json:"sourceId" format:"uuid"`
	Source        string        `json:"source" example:"apps"`
	Policy        string        `json:"policy" enum:"manual,review" example:"review"`
	State         string        `json:"state" enum:"Pending update,Review required" doc:"Pending update under manual, Review required under review."`
	Commit        string        `json:"commit" doc:"Send it back to accept."`
	CommitMessage string        `json:"commitMessage"`
	Fingerprint   string        `json:"fingerprint" doc:"SHA-256 of the commit and the plan; send it back to accept."`
	Created       []string      `json:"created" doc:"Paths of the units accepting creates."`
	Updated       []string      `json:"updated" doc:"Paths of the units whose content accepting changes."`
	Stale         []string      `json:"stale" doc:"Paths of the units accepting makes stale."`
	Invalid       []InvalidUnit `json:"invalid" doc:"Files that are not units, with the reason; their rows stay as they are."`
	RunID         *uuid.UUID    `json:"runId,omitempty" format:"uuid" doc:"The run whose fetch made the candidate."`
	FetchedAt     time.Time     `json:"fetchedAt"`
}

// InvalidUnit is a file that could not become a unit.
type InvalidUnit struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

type candidateOutput struct{ Body Candidate }

// SourceStatus is a source's status answer: the first thing that needs an
// operator, the path from Git to the inventory, and the evidence.
type SourceStatus struct {
	Source     string                    `json:"source" example:"apps"`
	Answer     StatusAnswer[SourceState] `json:"answer"`
	Path       []StatusStage             `json:"path" doc:"The stages from Git to the inventory; for now one, source."`
	Evidence   SourceStatusEvidence      `json:"evidence"`
	NextSyncAt *time.Time                `json:"nextSyncAt,omitempty" doc:"The next interval sync; absent when syncs are manual only or the source is suspended."`
}

// SourceStatusEvidence is the shared evidence, and the source's newest
// acceptance in full.
type SourceStatusEvidence struct {
	StatusEvidence
	LastAcceptance *AcceptanceEvidence `json:"lastAcceptance,omitempty" doc:"The receipt that put the commit in force: a sync or an accept of the source, or the sync an action on one of its services made before it acted."`
}

// AcceptanceEvidence is a receipt that put a commit of the source in force.
type AcceptanceEvidence struct {
	JournalID uuid.UUID `json:"journalId" format:"uuid"`
	Action    RunAction `json:"action" example:"accept_source"`
	By        string    `json:"by" doc:"The token name that asked, or system." example:"alice"`
	Decision  string    `json:"decision" doc:"The policy line that decided." example:"Operator accepted (alice)"`
	Policy    string    `json:"policy,omitempty" enum:"manual,review,auto-write,auto-deploy" doc:"The source's policy when the receipt was written; absent on an action's sync, which records none." example:"manual"`
	At        time.Time `json:"at"`
	Commit    string    `json:"commit"`
}

type sourceStatusOutput struct{ Body SourceStatus }

func sourceStatusOut(st *source.Status) SourceStatus {
	out := SourceStatus{
		Source: st.Source, NextSyncAt: st.NextSyncAt,
		Answer:   statusAnswerOut[SourceState](st.Answer),
		Path:     statusPathOut(st.Path),
		Evidence: SourceStatusEvidence{StatusEvidence: statusEvidenceOut(st.Evidence.Evidence)},
	}
	if acc := st.Evidence.LastAcceptance; acc != nil {
		out.Evidence.LastAcceptance = &AcceptanceEvidence{
			JournalID: acc.RunID, Action: RunAction(acc.Action), By: acc.By, Decision: acc.Decision, Policy: acc.Policy, At: acc.At, Commit: acc.Commit,
		}
	}
	return out
}

type acceptSourceInput struct {
	ID   string `path:"id" maxLength:"63" doc:"The source's id or name." example:"apps"`
	Body struct {
		Commit      string `json:"commit" minLength:"1" maxLength:"64" doc:"The candidate's commit, as GET …/candidate shows it."`
		Fingerprint string `json:"fingerprint" minLength:"1" maxLength:"64" doc:"The candidate's fingerprint, as GET …/candidate shows it."`
	}
}

type syncSourceInput struct {
	ID   string `path:"id" maxLength:"63" doc:"The source's id or name." example:"apps"`
	Full bool   `query:"full" doc:"Walk every unit instead of the paths changed since the last sync."`
}

func registerSources(api huma.API, d Deps) {
	// A source's push webhooks are its operations too.
	registerWebhooks(api, d)

	register(api, d, op("list-sources", http.MethodGet, "/sources", "List the sources, by name.", auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*listSourcesOutput, error) {
			srcs, err := d.Sources.List(ctx)
			if err != nil {
				return nil, err
			}
			out := &listSourcesOutput{}
			out.Body.Sources = make([]Source, 0, len(srcs))
			for _, s := range srcs {
				out.Body.Sources = append(out.Body.Sources, sourceOut(s))
			}
			return out, nil
		})

	o := op("create-source", http.MethodPost, "/sources",
		"Add a source. It syncs into a working tree of its own, at once when it has an interval; "+
			"its units that declare no metadata.id get identities of their own.",
		auth.RoleAdmin, http.StatusConflict, http.StatusUnprocessableEntity)
	o.DefaultStatus = http.StatusCreated
	register(api, d, o, func(ctx context.Context, in *createSourceInput) (*sourceOutput, error) {
		if err := checkRepoPath(in.Body.RepoURL); err != nil {
			return nil, err
		}
		s, err := d.Sources.Create(ctx, in.Body.domain(), requester(ctx))
		if err != nil {
			return nil, err
		}
		return &sourceOutput{Body: sourceOut(s)}, nil
	})

	register(api, d, op("get-source", http.MethodGet, "/sources/{id}", "Get one source.", auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *sourceRef) (*sourceOutput, error) {
			s, err := d.Sources.Get(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &sourceOutput{Body: sourceOut(s)}, nil
		})

	register(api, d, op("put-source", http.MethodPut, "/sources/{id}",
		"Change a source; a new name renames it (the default source keeps its name). "+
			"A new repository, branch or path makes the next sync walk every unit.",
		auth.RoleAdmin, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *putSourceInput) (*sourceOutput, error) {
			if err := checkRepoPath(in.Body.RepoURL); err != nil {
				return nil, err
			}
			s, err := d.Sources.Update(ctx, in.ID, in.Body.domain(), requester(ctx))
			if err != nil {
				return nil, err
			}
			return &sourceOutput{Body: sourceOut(s)}, nil
		})

	register(api, d, op("delete-source", http.MethodDelete, "/sources/{id}",
		"Delete a source: its units become stale (never destroyed) and its name is free again. "+
			"The default source cannot be deleted (409).",
		auth.RoleAdmin, http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *sourceRef) (*sourceOutput, error) {
			s, err := d.Sources.Delete(ctx, in.ID, requester(ctx))
			if err != nil {
				return nil, err
			}
			return &sourceOutput{Body: sourceOut(s)}, nil
		})

	o = op("sync-source", http.MethodPost, "/sources/{id}/sync",
		"Sync a source now. Answers 409 when a sync is already queued or running, or the source is suspended.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *syncSourceInput) (*ActionAccepted, error) {
		res, err := d.GitOps.RequestSourceSync(ctx, in.ID, requester(ctx), in.Full)
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	register(api, d, op("get-source-status", http.MethodGet, "/sources/{id}/status",
		"Get a source's status answer: its state (the first that holds), why, the command that moves it on, "+
			"how many other issues hold, the path and the evidence the journal's receipts grant.",
		auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *sourceRef) (*sourceStatusOutput, error) {
			st, err := d.Sources.GetStatus(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &sourceStatusOutput{Body: sourceStatusOut(st)}, nil
		})

	register(api, d, op("get-source-candidate", http.MethodGet, "/sources/{id}/candidate",
		"Get the candidate that waits for an operator: a commit and the change plan accepting it makes. 404 when none waits.",
		auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *sourceRef) (*candidateOutput, error) {
			c, err := d.Sources.GetCandidate(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			out := &candidateOutput{Body: Candidate{
				SourceID: c.SourceID, Source: c.Source, Policy: string(c.Policy), State: c.State,
				Commit: c.Commit, CommitMessage: c.CommitMessage, Fingerprint: c.Fingerprint,
				Created: nonNil(c.Created), Updated: nonNil(c.Updated), Stale: nonNil(c.Stale),
				Invalid: []InvalidUnit{}, RunID: c.RunID, FetchedAt: c.FetchedAt,
			}}
			for _, inv := range c.Invalid {
				out.Body.Invalid = append(out.Body.Invalid, InvalidUnit{Path: inv.Path, Reason: inv.Reason})
			}
			return out, nil
		})

	o = op("accept-source", http.MethodPost, "/sources/{id}/accept",
		"Accept the source's candidate: apply its plan to the inventory, journaled, recording the policy line "+
			"\"Operator accepted (token name)\" (and, under review, the reviewer and the plan). "+
			"409 when no candidate waits or it has moved on (another commit or plan).",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *acceptSourceInput) (*ActionAccepted, error) {
		res, err := d.GitOps.RequestAccept(ctx, in.ID, requester(ctx), in.Body.Commit, in.Body.Fingerprint)
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	for _, a := range []struct {
		id, path, summary string
		suspend           bool
	}{
		{"suspend-source", "/sources/{id}/suspend", "Suspend a source: no interval syncs, and manual syncs are refused, until it is resumed.", true},
		{"resume-source", "/sources/{id}/resume", "Resume a suspended source: its interval syncs and manual syncs work again.", false},
	} {
		register(api, d, op(a.id, http.MethodPost, a.path, a.summary, auth.RoleOperator, http.StatusNotFound),
			func(ctx context.Context, in *sourceRef) (*sourceOutput, error) {
				s, err := d.Sources.SetSuspended(ctx, in.ID, a.suspend, requester(ctx))
				if err != nil {
					return nil, err
				}
				return &sourceOutput{Body: sourceOut(s)}, nil
			})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
