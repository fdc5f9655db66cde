package services

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/hoststep"
	"sluice/internal/node"
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
	// Node is the node it runs on. Remote is true when that node is not
	// this process's: what runs there is then read from the agent's last
	// heartbeat (ReportedAt), or else from the receipts (what the last
	// actions left), not seen live.
	Node       string
	Remote     bool
	ReportedAt *time.Time
	// SilentSince is set, on another node, when its agent's last report is
	// older than the node silence bound: what runs there cannot be told,
	// and the fields above say what the receipts left.
	SilentSince *time.Time
	// ExeDigest and Proof are the node's proof of the bytes that run.
	ExeDigest, Proof string
	// Foreign says, when set, that what holds the name on the node is not
	// sluice's (its agent's report).
	Foreign string
}

// List returns every active service.
func (s *Service) List(ctx context.Context) ([]*View, error) {
	units, err := db.New(s.Pool).ServiceList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	return s.views(ctx, units)
}

// ListPageParams pages ListPage.
type ListPageParams struct {
	// AfterName and AfterID are the last service of the previous page;
	// zero for the first page.
	AfterName string
	AfterID   uuid.UUID
	// Limit is the most services a page holds, at least 1.
	Limit int
}

// ListPage returns a page of the active services, by name, as List reads
// them, with a fixed number of queries whatever the page's size, and
// whether more follow.
func (s *Service) ListPage(ctx context.Context, p ListPageParams) ([]*View, bool, error) {
	limit := max(p.Limit, 1)
	units, err := db.New(s.Pool).ServiceListPage(ctx, &db.ServiceListPageParams{
		AfterName: p.AfterName, AfterID: p.AfterID, MaxRows: int32(limit + 1),
	})
	if err != nil {
		return nil, false, fmt.Errorf("list services: %w", err)
	}
	more := len(units) > limit
	if more {
		units = units[:limit]
	}
	views, err := s.views(ctx, units)
	return views, more, err
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
	reports := &nodeReports{s: s}
	for i, u := range units {
		v := &View{Unit: u}
		views[i], byName[u.Name] = v, v
		names = append(names, u.Name)
		if spec, err := s.specs.parse(ctx, q, u); err == nil {
			v.Spec = spec
			pinNames, pins = append(pinNames, u.Name), append(pins, spec.Digest())
		}
		v.Process = s.process(ctx, u, v.Spec, reports)
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

// process reads what runs for service u: on this process's own node from
// the supervisor and the unit on disk; on another node from the receipts
// (Remote), since this process cannot see that host.
func (s *Service) process(ctx context.Context, u *db.Unit, spec *servicespec.Spec, reports *nodeReports) Process {
	p := Process{Node: deref(u.RunningNode)}
	if p.Node == "" && spec != nil {
		p.Node, _ = s.NodeOf(ctx, spec)
	}
	if !s.single() && (p.Node != s.LocalNode || s.Local == nil) {
		p.Remote = true
		r, at, fresh := reports.of(ctx, p.Node, u.Name)
		switch {
		case at != nil && !fresh:
			p.SilentSince = at
		case r != nil:
			// The agent's last heartbeat says what runs there.
			p.ReportedAt = at
			p.Running, p.Pid, p.LastExit = r.Running, r.Pid, r.NotRunning
			p.UnitDigest, p.RenderedHash = r.UnitDigest, r.UnitHash
			p.ExeDigest, p.Proof, p.Foreign = r.ExeDigest, r.Proof, r.Foreign
			return p
		case at != nil:
			// A fresh report names every service the host has a unit or a
			// process of: this one has neither there.
			p.ReportedAt = at
			p.LastExit = "its agent reports no unit or process of " + u.Name
			return p
		}
		return receiptsProcess(p, u)
	}
	in, _ := s.Local.Inspect(ctx, hoststep.InspectRequest{Name: u.Name})
	p.Running, p.Pid, p.LastExit = in.Running, in.Pid, in.NotRunning
	p.UnitDigest, p.RenderedHash = in.UnitDigest, in.UnitHash
	return p
}

// receiptsProcess is p, on another node, as the receipts left it: what the
// last action started, not seen live.
func receiptsProcess(p Process, u *db.Unit) Process {
	p.Running = u.RunningDigest != nil
	p.UnitDigest = deref(u.RunningDigest)
	p.Pid, p.RenderedHash, p.ExeDigest, p.Proof, p.LastExit = 0, "", "", "", ""
	if !p.Running {
		p.LastExit = "the last action on node " + p.Node + " left nothing running"
	}
	return p
}

// nodeReports reads the nodes' last reports once per view.
type nodeReports struct {
	s      *Service
	loaded bool
	by     map[string]map[string]*node.Process
	at     map[string]*time.Time
}

// of returns what node's agent last reported of service name (nil when
// nothing), when it last reported (nil when never), and whether that is
// within the silence bound.
func (r *nodeReports) of(ctx context.Context, nodeName, name string) (*node.Process, *time.Time, bool) {
	if !r.loaded {
		r.loaded = true
		r.by, r.at = map[string]map[string]*node.Process{}, map[string]*time.Time{}
		rows, err := db.New(r.s.Pool).NodeList(ctx)
		if err != nil {
			return nil, nil, false
		}
		for _, n := range rows {
			var rep node.Reported
			if n.LastHeartbeatAt == nil || json.Unmarshal(n.Reported, &rep) != nil {
				continue
			}
			r.at[n.Name] = n.LastHeartbeatAt
			r.by[n.Name] = map[string]*node.Process{}
			for i := range rep.Processes {
				r.by[n.Name][rep.Processes[i].Service] = &rep.Processes[i]
			}
		}
	}
	at := r.at[nodeName]
	if at == nil {
		return nil, nil, false
	}
	return r.by[nodeName][name], at, time.Since(*at) <= r.s.reportFresh()
}

// reportFresh is how old a node's report may be to tell what runs there:
// the node silence, 30 s unless NodeSilence says otherwise.
func (s *Service) reportFresh() time.Duration {
	if s.NodeSilence > 0 {
		return s.NodeSilence
	}
	return node.DefaultSilence
}

// specCache keeps the specs that views parsed, by service name and content
// hash: a list of 1,000 services parsed every spec again on each request,
// 39% of its CPU. A unit's content_hash is the SHA-256 of its content, so a
// hit is the spec Parse would return. A cached Spec is shared by every view
// that reads it, and nothing may change it. The cache is cleared when it
// holds specCacheSize specs, which bounds it whatever the inventory does.
type specCache struct {
	mu sync.Mutex
	m  map[specKey]*servicespec.Spec
}

type specKey struct{ name, hash string }

const specCacheSize = 4096

func (c *specCache) parse(ctx context.Context, q *db.Queries, u *db.Unit) (*servicespec.Spec, error) {
	key := specKey{u.Name, u.ContentHash}
	c.mu.Lock()
	spec, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return spec, nil
	}
	spec, err := servicespec.Parse(u.Name, u.Content)
	if err != nil {
		return nil, err // parsed again next time: an invalid spec is rare, and its error is read fresh
	}
	if err := resolveTx(ctx, q, u, spec); err != nil {
		return nil, err // resolved, or not, next time
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= specCacheSize {
		c.m = make(map[specKey]*servicespec.Spec)
	}
	c.m[key] = spec
	c.mu.Unlock()
	return spec, nil
}
