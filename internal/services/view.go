package services

import (
	"context"
	"fmt"

	"sluice/db"
	"sluice/internal/render"
	"sluice/internal/servicespec"
)

// View is what sluice knows of one service.
type View struct {
	Unit *db.Unit
	Spec *servicespec.Spec
	// PreviousHealthyDigest is where a rollback would go; "" when nowhere.
	PreviousHealthyDigest string
	// LastRun is the newest action run; nil when none was asked for.
	LastRun *db.JournalRun
	// Queue lists the open runs: the running one first, then the queued ones
	// in the order they will run.
	Queue   []*db.JournalRun
	Process Process
	// Pause is set while the service's queue is paused (the pause health
	// policy); nil when it runs.
	Pause *db.ServicePause
}

// DesiredAhead reports whether Git holds content that was not applied.
func (v *View) DesiredAhead() bool { return contentAhead(v.Unit) }

// contentAhead reports whether u's content is not the last applied one.
func contentAhead(u *db.Unit) bool {
	return u.LastAppliedHash == nil || *u.LastAppliedHash != u.ContentHash
}

// Process is what runs on this host for a service, read from the supervisor
// and the rendered unit, not from the database.
type Process struct {
	Running bool
	Pid     int
	// UnitDigest and RenderedHash describe the rendered unit on disk.
	UnitDigest   string
	RenderedHash string
	// LastExit says how the last process ended, when none runs.
	LastExit string
}

// List returns every active service.
func (s *Service) List(ctx context.Context) ([]*View, error) {
	units, err := db.New(s.Pool).ServiceList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	return s.views(ctx, units)
}

// Get returns the active service name, or NotFound.
func (s *Service) Get(ctx context.Context, name string) (*View, error) {
	u, _, err := getTx(ctx, db.New(s.Pool), name)
	if err != nil {
		return nil, err
	}
	views, err := s.views(ctx, []*db.Unit{u})
	if err != nil {
		return nil, err
	}
	return views[0], nil
}

// views reads the runs of units' services with one query per kind of fact,
// whatever their number.
func (s *Service) views(ctx context.Context, units []*db.Unit) ([]*View, error) {
	q := db.New(s.Pool)
	views := make([]*View, len(units))
	byName := make(map[string]*View, len(units))
	var names, pinNames, pins []string
	for i, u := range units {
		v := &View{Unit: u, Process: s.process(u.Name)}
		views[i], byName[u.Name] = v, v
		names = append(names, u.Name)
		if spec, err := servicespec.Parse(u.Name, u.Content); err == nil {
			v.Spec = spec
			pinNames, pins = append(pinNames, u.Name), append(pins, spec.Digest())
		}
	}
	last, err := q.ServiceLastRuns(ctx, &db.ServiceLastRunsParams{Targets: names, Actions: Actions})
	if err != nil {
		return nil, fmt.Errorf("last runs of services: %w", err)
	}
	for _, r := range last {
		byName[r.Target].LastRun = r
	}
	queued, err := q.ServiceQueues(ctx, &db.ServiceQueuesParams{Targets: names, Actions: Actions, FrontAction: ActionConverge})
	if err != nil {
		return nil, fmt.Errorf("queues of services: %w", err)
	}
	for _, r := range queued {
		v := byName[r.Target]
		v.Queue = append(v.Queue, r)
	}
	prev, err := q.ServicePreviousHealthyAll(ctx, &db.ServicePreviousHealthyAllParams{Targets: pinNames, Pins: pins, Actions: Actions})
	if err != nil {
		return nil, fmt.Errorf("previous healthy digests: %w", err)
	}
	for _, r := range prev {
		byName[r.Target].PreviousHealthyDigest = r.Digest
	}
	pauses, err := q.ServicePauseList(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("pauses of services: %w", err)
	}
	for _, p := range pauses {
		byName[p.Service].Pause = p
	}
	return views, nil
}

func (s *Service) process(name string) Process {
	var p Process
	if proc, err := s.Supervisor.Adopt(name); err == nil {
		p.Running, p.Pid = true, proc.Pid()
	} else {
		p.LastExit = err.Error()
	}
	if text, err := s.unitText(name); err == nil && text != nil {
		if m, err := render.Parse(text); err == nil {
			p.UnitDigest = m.ArtifactDigest
		}
		p.RenderedHash = render.Hash(text)
	}
	return p
}
