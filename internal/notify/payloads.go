package notify

// TargetParams are a create_notification_target receipt's: the target as
// operators see it (its URL shown without credentials or query, its
// secret never). It is the schema of that action's params in the API
// (httpapi's runPayloads).
type TargetParams struct {
	Kind   string   `json:"kind" enum:"http,slack" doc:"The target's kind."`
	URL    string   `json:"url" doc:"Its URL, as shown: without credentials or query."`
	Source string   `json:"source,omitempty" doc:"The source it is limited to; empty for every source."`
	Events []string `json:"events" doc:"The events it is sent."`
}
