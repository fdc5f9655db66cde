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
