package gitops

// The parameters sync_source and accept runs record. Each is the schema of
// its action's params in the API (httpapi's runPayloads); their result is
// a Result.

// SyncParams are a sync's: whether it was a full sync, and the webhook
// delivery that asked for it. A scheduled sync records none.
type SyncParams struct {
	Full    bool             `json:"full" doc:"True for a full sync (every unit read again)."`
	Webhook *WebhookDelivery `json:"webhook,omitempty" doc:"The webhook delivery that asked for this sync."`
}

// WebhookDelivery is what a sync keeps of the delivery that asked for it.
type WebhookDelivery struct {
	Host     string `json:"host" doc:"The forge that sent it."`
	Event    string `json:"event" doc:"Its event name."`
	Delivery string `json:"delivery" doc:"Its delivery id."`
	Commit   string `json:"commit" doc:"The commit it announced."`
	Ref      string `json:"ref" doc:"The ref it announced."`
}

// AcceptParams are an accept's: the candidate commit and the fingerprint
// of the change the operator saw.
type AcceptParams struct {
	Commit      string `json:"commit" doc:"The candidate commit accepted."`
	Fingerprint string `json:"fingerprint" doc:"The fingerprint of the change shown."`
}
