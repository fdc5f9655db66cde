// Package applications answers what sluice manages, in one list: every
// direct service and every Blueprint with its status answer, and one
// attention queue of what needs an operator, most urgent first. The API
// serves it as GET /api/v1/applications, and the console as its portfolio.
package applications

import (
	"context"
	"sort"

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
	Stage  string      `json:"stage"`
	State  string      `json:"state"`
	Tone   status.Tone `json:"tone" enum:"ok,info,warn,error"`
	Reason string      `json:"reason"`
	// Action is the command that moves it on; "" when none is needed.
	Action  string `json:"action,omitempty"`
	Others  int    `json:"others"`
	Partial bool   `json:"partial"`
}

// Portfolio is every application, by kind then name, and the ones that
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

// Get reads every application's answer now.
func (s *Service) Get(ctx context.Context) (*Portfolio, error) {
	out := &Portfolio{Applications: []Application{}, Attention: []Application{}}
	if s.Services != nil {
		statuses, err := s.Services.Statuses(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range statuses {
			a := st.Answer
			out.Applications = append(out.Applications, Application{Kind: KindService, Name: st.Service, Stage: a.Stage, State: a.State,
				Tone: a.Tone, Reason: a.Reason, Action: a.Action, Others: a.Others, Partial: a.Partial})
		}
	}
	if s.Blueprints != nil {
		views, err := s.Blueprints.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, v := range views {
			a := v.Status.Answer
			out.Applications = append(out.Applications, Application{Kind: KindBlueprint, Name: v.Name, Stage: a.Stage, State: a.State,
				Tone: a.Tone, Reason: a.Reason, Action: a.Action, Others: a.Others, Partial: a.Partial})
		}
	}
	for _, a := range out.Applications {
		if a.Tone == status.ToneError || a.Tone == status.ToneWarn {
			out.Attention = append(out.Attention, a)
		}
	}
	sort.SliceStable(out.Attention, func(i, j int) bool { return urgency(out.Attention[i]) < urgency(out.Attention[j]) })
	return out, nil
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
