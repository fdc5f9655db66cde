package source

import (
	"context"

	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/errs"
)

// Policy says what a source may do with what it fetches.
type Policy string

// The four policies. A source that names none is PolicyAutoWrite, which is
// what every sync did before policies existed.
const (
	// PolicyManual keeps each fetch as a candidate (Pending update) that
	// an operator accepts.
	PolicyManual Policy = "manual"
	// PolicyReview is PolicyManual whose acceptance records the reviewer
	// and the change plan they reviewed (Review required).
	PolicyReview Policy = "review"
	// PolicyAutoWrite applies each fetch to the inventory at once.
	PolicyAutoWrite Policy = "auto-write"
	// PolicyAutoDeploy applies each fetch, then converges the services it
	// created or updated and plans its infrastructure (applying the units
	// whose spec says "autoApply": true): see gitops.Service.AfterAcceptFunc.
	PolicyAutoDeploy Policy = "auto-deploy"
)

// Waits reports whether a fetch under the policy waits for an operator as
// the source's candidate. A deploy refuses to push a pin that would only
// wait.
func (p Policy) Waits() bool { return p == PolicyManual || p == PolicyReview }

// ParsePolicy checks a policy's name; "" is PolicyAutoWrite.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return PolicyAutoWrite, nil
	case PolicyManual, PolicyReview, PolicyAutoWrite, PolicyAutoDeploy:
		return p, nil
	}
	return "", errs.Errorf(errs.Invalid, "The policy %q is not one of manual, review, auto-write or auto-deploy.", s)
}

// checkPolicy checks a policy in an input; "" stays "", meaning keep.
func checkPolicy(p Policy) (Policy, error) {
	if p == "" {
		return "", nil
	}
	return ParsePolicy(string(p))
}

// The policy lines a receipt records as its Decision.
const (
	// DecisionAuto: an auto-write or auto-deploy source applied the fetch.
	DecisionAuto = "Applies without an operator"
	// DecisionPending: a manual source keeps the fetch as its candidate.
	DecisionPending = "Pending update: an operator accepts it"
	// DecisionReview: a review source keeps the fetch as its candidate.
	DecisionReview = "Review required: an operator reviews and accepts it"
)

// DecisionOperator is the policy line of an acceptance by the token name.
func DecisionOperator(name string) string { return "Operator accepted (" + name + ")" }

// WaitingDecision is the policy line of a fetch that waits as the candidate
// of a source under p.
func WaitingDecision(p Policy) string {
	if p == PolicyReview {
		return DecisionReview
	}
	return DecisionPending
}

// SetPolicy changes the policy of the source key names. It changes what the
// next decision may do, and withdraws nothing already accepted; a waiting
// candidate stays until it is accepted or replaced. by is who asks.
func (s *Service) SetPolicy(ctx context.Context, key string, policy Policy, by string) (*Source, error) {
	return s.change(ctx, key, by, func(ctx context.Context, _ pgx.Tx, q *db.Queries, cur *db.Source) (changed, error) {
		out, err := q.SourceSetPolicy(ctx, &db.SourceSetPolicyParams{ID: cur.ID, Policy: string(policy)})
		return changed{out, ActionSetPolicy, "policy " + string(policy)}, err
	})
}
