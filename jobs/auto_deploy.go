package jobs

import (
	"context"
	"errors"
	"fmt"

	"sluice/db"
	"sluice/internal/infra"
	"sluice/internal/infraspec"
	"sluice/internal/journal"
	"sluice/internal/services"
	"sluice/internal/servicespec"
)

// AutoDeployFunc is what an auto-deploy source does with the units a sync
// or an accept created or updated (gitops.Service.AfterAcceptFunc): it asks,
// as "system", for a converge of every service, and for a plan of every
// infrastructure unit, or an apply when its spec says "autoApply": true.
// A nil svcs or inf leaves that kind alone. It lives here because gitops
// cannot import services or infra, which import gitops.
func AutoDeployFunc(svcs *services.Service, inf *infra.Service) func(ctx context.Context, accepted []*db.Unit) error {
	return func(ctx context.Context, accepted []*db.Unit) error {
		var errList []error
		for _, u := range accepted {
			switch {
			case u.Kind == servicespec.Kind && svcs != nil:
				if _, err := svcs.RequestConverge(ctx, u.Name, journal.RequestedBySystem); err != nil {
					errList = append(errList, fmt.Errorf("converge %s: %w", u.Name, err))
				}
			case u.Kind == infraspec.Kind && inf != nil:
				action := infra.ActionPlan
				if spec, err := infraspec.Parse(u.Content); err == nil && spec.AutoApply {
					action = infra.ActionApply
				}
				if _, err := inf.Request(ctx, action, u.ID.String(), journal.RequestedBySystem); err != nil {
					errList = append(errList, fmt.Errorf("%s %s: %w", action, u.Path, err))
				}
			}
		}
		return errors.Join(errList...)
	}
}
