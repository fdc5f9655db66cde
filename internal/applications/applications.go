// Package applications answers what sluice manages, in one list: every
// direct service and every Blueprint with its status answer, and one
// attention queue of what needs an operator, most urgent first. The API
// serves it as GET /api/v1/applications, a page at a time, and the console
// as its portfolio.
package applications

import (
	"context"
	"sort"

	"github.com/google/uuid"

	"sluice/internal/blueprint"
	"sluice/internal/services"
	"sluice/internal/status"
)

// Kinds of application.
const (
	KindService   = "service"
	KindBlueprint = "blueprint"
)

// Application is one managed thing and its answer.
type Application struct {
	Kind string `json:"kind" enum:"service,blueprint"`
	Name string `json:"name"`
	// Stage, State, Tone and Reason are its status answer: the first stage
	// that needs an operator, else its runtime's state.
	Stage  string      `json:"stage" enum:"source,artifact,placement,rollout,runtime,plan,apply,drift"`
	State  string      `json:"state"`
	Tone   status.Tone `json:"tone" enum:"ok,info,warn,error"`
	Reason string      `json:"reason"`
	// Action is the command that moves it on; "" when none is needed.
	Action  string `json:"action,omitempty"`
	Others  int    `json:"others"`
	Partial bool   `json:"partial"`
	// Urgency is its place in the attention queue, lower first.
	Urgency int `json:"urgency" doc:"Its rank in the attention queue, lower first: the attention of several pages, one after the other, sorted by it (a stable sort) is the queue of all of them."`
}

// Portfolio is applications, by kind then name, and the ones of them that
// need an operator, most urgent first.
type Portfolio struct {
	Applications []Application `json:"applications"`
	Attention    []Application `json:"attention"`
}

// Service reads the portfolio.
type Service struct {
	Services   *services.Service
	Blueprints *blueprint.Service
}

// PageParams pages GetPage.
type PageParams struct {
	// AfterKind and AfterName are the last application of the previous
	// page; "" for the first page.
	AfterKind, AfterName string
	// Limit is the most applications a page holds, at least 1.
	Limit int
}

// Page is a page of the portfolio: the services by name, then the
// Blueprints by name. More says whether another page follows.
type Page struct {
	Portfolio
	More bool
}

// GetPage reads the answers of a page of applications now. The services'
// answers are read with a fixed number of queries whatever the page's size;
// each Blueprint's view is read on its own.
func (s *Service) GetPage(ctx context.Context, p PageParams) (*Page, error) {
	limit := max(p.Limit, 1)
	out := &Page{Portfolio: Portfolio{Applications: []Application{}, Attention: []Application{}}}
	if s.Services != nil && p.AfterKind != KindBlueprint {
		lp := services.ListPageParams{Limit: limit}
		if p.AfterKind == KindService {
			// Active service names are unique: every id of the name is
			// at or below the largest.
			lp.AfterName, lp.AfterID = p.AfterName, uuid.Max
		}
		views, more, err := s.Services.ListPage(ctx, lp)
		if err != nil {
			return nil, err
		}
		statuses, err := s.Services.StatusesOf(ctx, views)
		if err != nil {
			return nil, err
		}
		for _, st := range statuses {
			out.add(KindService, st.Service, st.Answer)
		}
		out.More = more
	}
	if s.Blueprints != nil && !out.More {
		after := ""
		if p.AfterKind == KindBlueprint {
			after = p.AfterName
		}
		views, more, err := s.Blueprints.ListAfter(ctx, after, limit-len(out.Applications))
		if err != nil {
			return nil, err
		}
		for _, v := range views {
			out.add(KindBlueprint, v.Name, v.Status.Answer)
		}
		out.More = more
	}
	for _, a := range out.Applications {
		if a.Tone == status.ToneError || a.Tone == status.ToneWarn {
			out.Attention = append(out.Attention, a)
		}
	}
	sort.SliceStable(out.Attention, func(i, j int) bool { return out.Attention[i].Urgency < out.Attention[j].Urgency })
	return out, nil
}

// add appends the application kind name answering a.
func (p *Page) add(kind, name string, a status.Answer) {
	app := Application{Kind: kind, Name: name, Stage: a.Stage, State: a.State,
		Tone: a.Tone, Reason: a.Reason, Action: a.Action, Others: a.Others, Partial: a.Partial}
	app.Urgency = urgency(app)
	p.Applications = append(p.Applications, app)
}

// stageRank orders stages by how directly they touch what runs: a broken
// runtime first, then a rollout, an artifact, a placement, a source.
var stageRank = map[string]int{"runtime": 0, "rollout": 1, "artifact": 2, "placement": 3, "source": 4}

// urgency ranks an attention item: errors before warnings, then by stage,
// then an answer with evidence missing first (nobody can tell it is fine).
func urgency(a Application) int {
	u := 0
	if a.Tone != status.ToneError {
		u += 100
	}
	r, ok := stageRank[a.Stage]
	if !ok {
		r = 5
	}
	u += 10 * r
	if !a.Partial {
		u++
	}
	return u
}
