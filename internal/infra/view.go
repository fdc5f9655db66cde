package infra

import (
	"context"
	"fmt"

	"sluice/db"
	"sluice/internal/infraspec"
)

// View is what sluice knows of one infrastructure unit.
type View struct {
	Unit *db.Unit
	// Spec is nil when the content does not read as infrastructure.
	Spec *infraspec.Spec
	// The newest run of each operation; nil when there was none.
	LastPlan, LastApply, LastDestroy, LastDriftCheck *db.JournalRun
}

// DesiredAhead reports whether Git holds content that was not applied.
func (v *View) DesiredAhead() bool {
	return v.Unit.LastAppliedHash == nil || *v.Unit.LastAppliedHash != v.Unit.ContentHash
}

// List returns every infrastructure unit, stale and destroyed ones included.
func (s *Service) List(ctx context.Context) ([]*View, error) {
	units, err := db.New(s.Pool).InfraList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list infrastructure: %w", err)
	}
	return s.views(ctx, units)
}

// Get returns the unit key names (its id or name).
func (s *Service) Get(ctx context.Context, key string) (*View, error) {
	u, err := find(ctx, db.New(s.Pool), key)
	if err != nil {
		return nil, err
	}
	views, err := s.views(ctx, []*db.Unit{u})
	if err != nil {
		return nil, err
	}
	return views[0], nil
}

func (s *Service) views(ctx context.Context, units []*db.Unit) ([]*View, error) {
	views := make([]*View, len(units))
	byTarget := make(map[string]*View, len(units))
	targets := make([]string, len(units))
	for i, u := range units {
		v := &View{Unit: u}
		if spec, err := infraspec.Parse(u.Content); err == nil {
			v.Spec = spec
		}
		views[i], byTarget[u.ID.String()], targets[i] = v, v, u.ID.String()
	}
	runs, err := db.New(s.Pool).RunsLatestByTargets(ctx, &db.RunsLatestByTargetsParams{Targets: targets, Actions: Actions})
	if err != nil {
		return nil, fmt.Errorf("latest operations: %w", err)
	}
	for _, r := range runs {
		v := byTarget[r.Target]
		switch r.Action {
		case ActionPlan:
			v.LastPlan = r
		case ActionApply:
			v.LastApply = r
		case ActionDestroy:
			v.LastDestroy = r
		case ActionDriftCheck:
			v.LastDriftCheck = r
		}
	}
	return views, nil
}
