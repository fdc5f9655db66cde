package httpapi

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/auth"
	"sluice/internal/gitops"
)

// SyncPath is one path of a sync and what the sync did to it.
type SyncPath struct {
	Path    string `json:"path" doc:"Relative to the repository root." example:"apps/web.json"`
	Outcome string `json:"outcome" enum:"created,updated,stale,invalid" doc:"What the run did to the path (for a candidate that waits: what accepting it would do)."`
	Reason  string `json:"reason,omitempty" doc:"Why the file is invalid; only for invalid."`
}

type listSyncPathsInput struct {
	ID      uuid.UUID `path:"id" format:"uuid"`
	Outcome string    `query:"outcome" enum:"created,updated,stale,invalid" doc:"Only paths with this outcome."`
	Limit   int       `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Page size."`
	Cursor  string    `query:"cursor" maxLength:"8192" doc:"nextCursor from the previous page."`
}

type listSyncPathsOutput struct {
	Body struct {
		Paths      []SyncPath `json:"paths" doc:"Ordered by outcome, then path."`
		NextCursor string     `json:"nextCursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

func registerSyncPaths(api huma.API, d Deps) {
	register(api, d, op("list-journal-run-paths", http.MethodGet, "/journal/{id}/paths",
		"List every path a sync run counted, with its outcome: the receipt holds counts and a sample, this holds them all. "+
			"A sync, an accept, or an action that synced first has them; a run that changed nothing has none.",
		auth.RoleViewer, http.StatusNotFound, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *listSyncPathsInput) (*listSyncPathsOutput, error) {
			// Look the run up first, so a wrong id is a 404, not an empty page.
			if _, err := d.Journal.Get(ctx, in.ID); err != nil {
				return nil, err
			}
			limit := min(max(in.Limit, 1), 1000)
			// One more than a page tells whether another page follows.
			p := gitops.ListSyncPathsParams{RunID: in.ID, Outcome: in.Outcome, Limit: limit + 1}
			if in.Cursor != "" {
				var err error
				if p.AfterOutcome, p.AfterPath, err = decodePathCursor(in.Cursor); err != nil {
					return nil, err
				}
			}
			paths, err := d.GitOps.ListSyncPaths(ctx, p)
			if err != nil {
				return nil, err
			}
			out := &listSyncPathsOutput{}
			if len(paths) > limit {
				paths = paths[:limit]
				last := paths[len(paths)-1]
				out.Body.NextCursor = encodePathCursor(last.Outcome, last.Path)
			}
			out.Body.Paths = make([]SyncPath, 0, len(paths))
			for _, sp := range paths {
				out.Body.Paths = append(out.Body.Paths, SyncPath{Path: sp.Path, Outcome: sp.Outcome, Reason: sp.Reason})
			}
			return out, nil
		})
}

// A paths cursor is the key of the last path of a page, opaque to clients:
// base64url of "outcome\x00path" (a Git path holds no NUL).

func encodePathCursor(outcome, path string) string {
	return encodeCursorPair(outcome, path)
}

func decodePathCursor(s string) (outcome, path string, err error) {
	outcome, path, err = decodeCursorPair(s)
	switch {
	case err != nil:
		return "", "", err
	case path == "", !utf8.ValidString(path), strings.ContainsRune(path, 0):
		return "", "", errBadCursor()
	case outcome == gitops.OutcomeCreated, outcome == gitops.OutcomeUpdated, outcome == gitops.OutcomeStale, outcome == gitops.OutcomeInvalid:
		return outcome, path, nil
	}
	return "", "", errBadCursor()
}
