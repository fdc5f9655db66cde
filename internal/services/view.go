package services

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
}

// DesiredAhead reports whether Git holds content that was not applied.
func (v *View) DesiredAhead() bool {
	return v.Unit.LastAppliedHash == nil || *v.Unit.LastAppliedHash != v.Unit.ContentHash
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
	views := make([]*View, 0, len(units))
	for _, u := range units {
		v, err := s.view(ctx, u)
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	return views, nil
}

// Get returns the active service name, or NotFound.
func (s *Service) Get(ctx context.Context, name string) (*View, error) {
	u, _, err := getTx(ctx, db.New(s.Pool), name)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, u)
}

func (s *Service) view(ctx context.Context, u *db.Unit) (*View, error) {
	q := db.New(s.Pool)
	v := &View{Unit: u}
	if spec, err := servicespec.Parse(u.Name, u.Content); err == nil {
		v.Spec = spec
		prev, err := previousHealthy(ctx, q, u.Name, spec.Digest())
		if err != nil {
			return nil, err
		}
		v.PreviousHealthyDigest = prev
	}
	last, err := q.ServiceLastRun(ctx, &db.ServiceLastRunParams{Target: u.Name, Actions: Actions})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("last run of %s: %w", u.Name, err)
	default:
		v.LastRun = last
	}
	if v.Queue, err = q.ServiceQueue(ctx, &db.ServiceQueueParams{Target: u.Name, Actions: Actions, FrontAction: ActionConverge}); err != nil {
		return nil, fmt.Errorf("queue of %s: %w", u.Name, err)
	}
	v.Process = s.process(u.Name)
	return v, nil
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
		sum := sha256.Sum256(text)
		p.RenderedHash = "sha256:" + hex.EncodeToString(sum[:])
	}
	return p
}
