package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"sluice/internal/applications"
	"sluice/internal/auth"
)

type applicationsOutput struct {
	Body *applications.Portfolio
}

func registerApplications(api huma.API, d Deps) {
	p := &applications.Service{Services: d.Services, Blueprints: d.Blueprints}
	register(api, d, op("list-applications", http.MethodGet, "/applications",
		"List every direct service and every Blueprint with its status answer (the first stage that needs an operator, "+
			"else its runtime's state), and one attention queue: what needs an operator, most urgent first (errors before "+
			"warnings; what runs before how it got there).",
		auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*applicationsOutput, error) {
			out, err := p.Get(ctx)
			if err != nil {
				return nil, err
			}
			return &applicationsOutput{Body: out}, nil
		})
}
