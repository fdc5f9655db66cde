package gitops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/infraspec"
	"sluice/internal/servicespec"
	"sluice/internal/unit"
)

// checkServices moves the Service and Infrastructure units whose spec does
// not read as one to invalid, with the reason: the inventory holds only units
// an action can act on.
func checkServices(units []*unit.Unit, invalid []unit.Invalid) ([]*unit.Unit, []unit.Invalid) {
	kept := units[:0:0]
	for _, u := range units {
		var err error
		switch u.Kind {
		case servicespec.Kind:
			_, err = servicespec.Parse(u.Name, u.Content)
		case infraspec.Kind:
			_, err = infraspec.Parse(u.Content)
		}
		if err != nil {
			invalid = append(invalid, unit.Invalid{Path: u.Path, Reason: err.Error()})
			continue
		}
		kept = append(kept, u)
	}
	return kept, invalid
}

// uniqueServiceNames keeps a service's name unique among active services,
// since actions address services by name: a Service unit whose name an
// active service of another path keeps (or, in this sync, a path sorting
// before it) is invalid, and its row is left as it was.
func (p *plan) uniqueServiceNames(ctx context.Context, q *db.Queries, units []*unit.Unit, invalidPaths map[string]bool) ([]*unit.Unit, error) {
	var names []string
	inPlan := make(map[uuid.UUID]bool, len(units))
	for _, u := range units {
		inPlan[u.ID] = true
		if u.Kind == servicespec.Kind {
			names = append(names, u.Name)
		}
	}
	if len(names) == 0 {
		return units, nil
	}
	rows, err := q.ServiceListByNames(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("load services by name: %w", err)
	}
	taken := map[string]string{} // name -> path of the service that keeps it
	for _, r := range rows {
		// A row of this source that this sync replaces (same id) or may
		// remove (its path changed, or a full walk did not see it) does not
		// keep its name.
		kept := r.SourceID != p.source.ID ||
			(p.changed != nil && !p.changed[r.Path] && !inPlan[r.ID])
		if kept {
			taken[r.Name] = r.Path
		}
	}
	sorted := slices.Clone(units)
	slices.SortFunc(sorted, func(a, b *unit.Unit) int { return strings.Compare(a.Path, b.Path) })
	drop := map[uuid.UUID]bool{}
	for _, u := range sorted {
		if u.Kind != servicespec.Kind {
			continue
		}
		if other, ok := taken[u.Name]; ok && other != u.Path {
			p.invalid = append(p.invalid, unit.Invalid{Path: u.Path,
				Reason: fmt.Sprintf("metadata.name %q is also the name of the service at %s; service names must be unique", u.Name, other)})
			invalidPaths[u.Path] = true
			drop[u.ID] = true
			continue
		}
		taken[u.Name] = u.Path
	}
	if len(drop) == 0 {
		return units, nil
	}
	kept := units[:0:0]
	for _, u := range units {
		if !drop[u.ID] {
			kept = append(kept, u)
		}
	}
	return kept, nil
}

// ArtifactCheck says whether a service's pinned digest was in the artifact
// store when its content was accepted.
type ArtifactCheck struct {
	Service string `json:"service"`
	Path    string `json:"path"`
	Digest  string `json:"digest"`
	InStore bool   `json:"inStore"`
}

// checkArtifactsTx checks, at acceptance, that each accepted service's
// pinned digest exists in the artifact store. A missing one does not stop
// the acceptance (the artifact may be pushed later); the receipt and the
// service's status say so.
func checkArtifactsTx(ctx context.Context, q *db.Queries, accepted []*db.Unit) ([]ArtifactCheck, error) {
	var checks []ArtifactCheck
	var digests []string
	for _, u := range accepted {
		if u.Kind != servicespec.Kind {
			continue
		}
		spec, err := servicespec.Parse(u.Name, u.Content)
		if err != nil {
			continue // checkServices admitted it; nothing to pin
		}
		checks = append(checks, ArtifactCheck{Service: u.Name, Path: u.Path, Digest: spec.Digest()})
		digests = append(digests, spec.Digest())
	}
	if len(checks) == 0 {
		return nil, nil
	}
	present, err := q.ArtifactDigestsPresent(ctx, digests)
	if err != nil {
		return nil, fmt.Errorf("check the pinned artifacts: %w", err)
	}
	in := make(map[string]bool, len(present))
	for _, d := range present {
		in[d] = true
	}
	for i := range checks {
		checks[i].InStore = in[checks[i].Digest]
	}
	return checks, nil
}
