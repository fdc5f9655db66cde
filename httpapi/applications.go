package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/applications"
	"sluice/internal/auth"
)

type listApplicationsInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"8192" doc:"nextCursor from the previous page."`
}

// Portfolio is a page of applications, and the ones of them that need an
// operator, most urgent first.
type Portfolio struct {
	applications.Portfolio
	NextCursor string `json:"nextCursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
}

type applicationsOutput struct {
	Body *Portfolio
}

func registerApplications(api huma.API, d Deps) {
	p := &applications.Service{Services: d.Services, Blueprints: d.Blueprints}
	register(api, d, op("list-applications", http.MethodGet, "/applications",
		"List the direct services, then the Blueprints, each by name, with its status answer (the first stage that "+
			"needs an operator, else its runtime's state), and one attention queue of the page's applications: what needs "+
			"an operator, most urgent first (errors before warnings; what runs before how it got there). The attention of "+
			"several pages merges by urgency.",
		auth.RoleViewer, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *listApplicationsInput) (*applicationsOutput, error) {
			pp := applications.PageParams{Limit: min(max(in.Limit, 1), 1000)}
			if in.Cursor != "" {
				kind, name, err := decodeCursorPair(in.Cursor)
				if err != nil {
					return nil, err
				}
				if kind != applications.KindService && kind != applications.KindBlueprint {
					return nil, errBadCursor()
				}
				pp.AfterKind, pp.AfterName = kind, name
			}
			page, err := p.GetPage(ctx, pp)
			if err != nil {
				return nil, err
			}
			out := &Portfolio{Portfolio: page.Portfolio}
			if page.More {
				last := page.Applications[len(page.Applications)-1]
				out.NextCursor = encodeCursorPair(last.Kind, last.Name)
			}
			return &applicationsOutput{Body: out}, nil
		})
}
