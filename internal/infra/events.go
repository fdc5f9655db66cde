package infra

// EventPlan is the kind of a plan's event that lists what it changes.
const EventPlan = "plan"

// PlanEvent is that event's data: the schema of its kind in the API's
// Event (httpapi's eventPayloads).
type PlanEvent struct {
	Kind      string   `json:"kind" enum:"plan"`
	Addresses []string `json:"addresses" doc:"The resource addresses the plan changes (up to 40)."`
}
