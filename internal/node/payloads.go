package node

import "time"

// The parameters the node receipts record. Each is the schema of its
// action's params in the API (httpapi's runPayloads), so they are named
// types, not maps. A join records the agent's Reported.

// LabelsParams are an add_node's or a set_node_labels's: the labels given.
type LabelsParams struct {
	Labels map[string]string `json:"labels" doc:"The node's labels, as given."`
}

// RotateParams are a rotate_node's: when the new join token expires (the
// token itself is never recorded).
type RotateParams struct {
	ExpiresAt time.Time `json:"expiresAt" doc:"When the new join token expires."`
}
