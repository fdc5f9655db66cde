package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/auth"
	"sluice/internal/gitops"
	"sluice/internal/source"
)

// GitOpsSettings are the default source's settings.
type GitOpsSettings struct {
	RepoURL         string `json:"repoUrl" maxLength:"2048" doc:"The intent repository: https, ssh, file:// or a local path. Credentials are shown as ***; send the URL back unchanged to keep them." example:"https://git.example.com/ops/intent.git"`
	Branch          string `json:"branch" maxLength:"255" doc:"The branch to track." default:"main" example:"main"`
	Path            string `json:"path" maxLength:"1024" doc:"Optional subdirectory holding the units: relative, no .., not absolute." example:"units"`
	SyncIntervalSec int    `json:"syncIntervalSec" minimum:"0" maximum:"31536000" doc:"Seconds between interval syncs, at most a year (31536000); 0 means manual syncs only." example:"600"`
}

func settingsOut(s *source.Settings) GitOpsSettings {
	return GitOpsSettings{RepoURL: s.RepoURL, Branch: s.Branch, Path: s.Path, SyncIntervalSec: s.SyncIntervalSec}
}

// GitOpsLastSync summarizes the newest finished sync.
type GitOpsLastSync struct {
	JournalID     uuid.UUID  `json:"journalId" format:"uuid"`
	State         RunState   `json:"state"`
	Commit        string     `json:"commit,omitempty"`
	CommitMessage string     `json:"commitMessage,omitempty"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	FinishedAt    *time.Time `json:"finishedAt,omitempty"`
	Error         string     `json:"error,omitempty"`
	Created       int        `json:"created"`
	Updated       int        `json:"updated"`
	Unchanged     int        `json:"unchanged"`
	Stale         int        `json:"stale"`
	Invalid       int        `json:"invalid"`
}

// GitOpsStatus says where sync stands.
type GitOpsStatus struct {
	GitOpsSettings
	Syncing      bool            `json:"syncing" doc:"A sync is queued or running."`
	NextSyncAt   *time.Time      `json:"nextSyncAt,omitempty" doc:"When the interval next fires; absent for manual only."`
	SkippedTicks int64           `json:"skippedTicks" doc:"Interval ticks skipped because a sync was still busy."`
	TrackedCount int             `json:"trackedCount" doc:"Units in Git now (not stale or destroyed)."`
	Counts       map[string]int  `json:"counts" doc:"Units per status: pending, applied, failed, stale, destroyed."`
	LastSync     *GitOpsLastSync `json:"lastSync,omitempty"`
	InForce      string          `json:"inForce,omitempty" maxLength:"64" doc:"The commit the inventory holds now, as source status says; a deploy or rollback that pushed a pin moves it without a sync run."`
}

// Unit is one desired-state unit of the inventory.
type Unit struct {
	ID              uuid.UUID `json:"id" format:"uuid"`
	Path            string    `json:"path" doc:"Relative to the repository root."`
	Kind            string    `json:"kind"`
	Name            string    `json:"name"`
	Labels          any       `json:"labels,omitempty"`
	Status          string    `json:"status" enum:"pending,applied,failed,stale,destroyed"`
	ContentHash     string    `json:"contentHash" doc:"The unit's identity: the lowercase hex SHA-256 of the UTF-8 bytes of the unit file's canonical JSON, which has no whitespace outside strings; object keys sorted by their UTF-8 bytes at every level; numbers exactly as the file writes them (1.0 stays 1.0, 1e3 stays 1e3); and strings with escapes decoded, then written with only \\\" and \\\\, \\b \\f \\n \\r \\t, and \\u00xx (lowercase hex) for the other characters below U+0020: everything else, <, > and & among them, literal. It is not RFC 8785 (JCS), which writes numbers as ECMAScript does (1.0 as 1) and sorts keys by UTF-16 code units. Recompute it from the file at commit: content is the unit as PostgreSQL's jsonb holds it, which writes 1e3 as 1000 and -0 as 0." example:"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"`
	LastAppliedHash *string   `json:"lastAppliedHash,omitempty"`
	DesiredAhead    bool      `json:"desiredAhead" doc:"Git holds content that was not applied yet."`
	Commit          string    `json:"commit" doc:"The commit the content was synced from."`
	Content         any       `json:"content"`
	CreatedAt       time.Time `json:"createdAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

func unitOut(u *db.Unit) Unit {
	return Unit{
		ID: u.ID, Path: u.Path, Kind: u.Kind, Name: u.Name, Labels: rawAny(u.Labels), Status: u.Status,
		ContentHash: u.ContentHash, LastAppliedHash: u.LastAppliedHash,
		DesiredAhead: u.LastAppliedHash == nil || *u.LastAppliedHash != u.ContentHash,
		Commit:       u.GitCommit, Content: json.RawMessage(u.Content), CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt,
	}
}

type settingsOutput struct{ Body GitOpsSettings }

type putSettingsInput struct{ Body GitOpsSettings }

type putSettingsOutput struct {
	Body struct {
		GitOpsSettings
		JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The receipt of the change."`
	}
}

type statusOutput struct{ Body GitOpsStatus }

type syncInput struct {
	Full bool `query:"full" doc:"Walk every unit instead of the paths changed since the last sync."`
}

type listUnitsInput struct {
	Status     string `query:"status" enum:"pending,applied,failed,stale,destroyed" doc:"Only units with this status."`
	Kind       string `query:"kind" maxLength:"63" doc:"Only units of this kind."`
	PathPrefix string `query:"pathPrefix" maxLength:"4096" doc:"Only units whose path starts with this."`
	Limit      int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor     string `query:"cursor" maxLength:"8192" doc:"nextCursor from the previous page."`
}

type listUnitsOutput struct {
	Body struct {
		Units      []Unit `json:"units" doc:"Ordered by path."`
		NextCursor string `json:"nextCursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

type getUnitInput struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

type getUnitOutput struct{ Body Unit }

func registerGitOps(api huma.API, d Deps) {
	register(api, d, op("get-gitops-status", http.MethodGet, "/gitops/status",
		"Where sync stands: settings, schedule, unit counts and the last sync.", auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*statusOutput, error) {
			st, err := d.GitOps.GetStatus(ctx)
			if err != nil {
				return nil, err
			}
			out := &statusOutput{}
			out.Body = GitOpsStatus{
				GitOpsSettings: settingsOut(&st.Settings), Syncing: st.Syncing, NextSyncAt: st.NextSyncAt,
				SkippedTicks: st.SkippedTicks, TrackedCount: st.TrackedCount, Counts: st.Counts, InForce: st.InForce,
			}
			if ls := st.LastSync; ls != nil {
				out.Body.LastSync = &GitOpsLastSync{
					JournalID: ls.JournalID, State: RunState(ls.State), Commit: ls.Commit, CommitMessage: ls.CommitMessage,
					StartedAt: ls.StartedAt, FinishedAt: ls.FinishedAt, Error: ls.Error, Created: ls.Created,
					Updated: ls.Updated, Unchanged: ls.Unchanged, Stale: ls.Stale, Invalid: ls.Invalid,
				}
			}
			return out, nil
		})

	register(api, d, op("get-gitops-settings", http.MethodGet, "/gitops/settings",
		"The GitOps settings in force.", auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*settingsOutput, error) {
			s, err := d.Sources.GetSettings(ctx)
			if err != nil {
				return nil, err
			}
			return &settingsOutput{Body: settingsOut(s)}, nil
		})

	register(api, d, op("put-gitops-settings", http.MethodPut, "/gitops/settings",
		"Change the GitOps settings. They are in force for the next sync and tick, without a restart; "+
			"a new repository, branch or path makes the next sync walk every unit.", auth.RoleAdmin, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *putSettingsInput) (*putSettingsOutput, error) {
			if err := checkRepoPath(in.Body.RepoURL); err != nil {
				return nil, err
			}
			s, err := d.Sources.PutSettings(ctx, source.SettingsInput{
				RepoURL: in.Body.RepoURL, Branch: in.Body.Branch, Path: in.Body.Path, SyncIntervalSec: in.Body.SyncIntervalSec,
			}, requester(ctx))
			if err != nil {
				return nil, err
			}
			out := &putSettingsOutput{}
			out.Body.GitOpsSettings, out.Body.JournalID = settingsOut(s), s.JournalID
			return out, nil
		})

	o := op("sync-gitops", http.MethodPost, "/gitops/sync",
		"Sync now. Answers 409 when a sync is already queued or running.", auth.RoleOperator, http.StatusConflict)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *syncInput) (*ActionAccepted, error) {
		res, err := d.GitOps.RequestSync(ctx, requester(ctx), in.Full)
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	register(api, d, op("list-units", http.MethodGet, "/units",
		"List the unit inventory, ordered by path.", auth.RoleViewer, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *listUnitsInput) (*listUnitsOutput, error) {
			limit := min(max(in.Limit, 1), 1000)
			p := gitops.UnitListParams{Status: in.Status, Kind: in.Kind, PathPrefix: in.PathPrefix, Limit: limit + 1}
			if in.Cursor != "" {
				path, id, err := decodeCursor(in.Cursor)
				if err != nil {
					return nil, err
				}
				p.AfterPath, p.AfterID = path, id
			}
			units, err := d.GitOps.ListUnits(ctx, p)
			if err != nil {
				return nil, err
			}
			out := &listUnitsOutput{}
			if len(units) > limit {
				units = units[:limit]
				last := units[len(units)-1]
				out.Body.NextCursor = encodeCursor(last.Path, last.ID)
			}
			out.Body.Units = make([]Unit, 0, len(units))
			for _, u := range units {
				out.Body.Units = append(out.Body.Units, unitOut(u))
			}
			return out, nil
		})

	register(api, d, op("get-unit", http.MethodGet, "/units/{id}", "Get one unit.", auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *getUnitInput) (*getUnitOutput, error) {
			u, err := d.GitOps.GetUnit(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &getUnitOutput{Body: unitOut(u)}, nil
		})
}
