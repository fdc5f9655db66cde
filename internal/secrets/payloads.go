package secrets

import "github.com/google/uuid"

// ScopeParams are a set_secret's or a delete_secret's receipt params: the
// secret's name and scope, never its value. SecretResult is their result.
// Both are schemas of those actions in the API (httpapi's runPayloads).
type ScopeParams struct {
	Name     string     `json:"name" doc:"The secret's name."`
	Scope    string     `json:"scope" enum:"global,source" doc:"Its scope."`
	Source   string     `json:"source,omitempty" doc:"The source of a source-scoped secret."`
	SourceID *uuid.UUID `json:"sourceId,omitempty" format:"uuid" doc:"That source's id."`
}

// SecretResult names the version a set or a delete made.
type SecretResult struct {
	SecretID uuid.UUID `json:"secretId" format:"uuid" doc:"The secret's id."`
	Version  int32     `json:"version" doc:"The version the change made."`
}

// EventSecrets is the kind of the event that names the secrets an action
// hands its process or Terraform.
const EventSecrets = "secrets"

// SecretsEvent is that event's data: each environment variable (or
// Terraform variable) and the secret reference it comes from, never a
// value.
type SecretsEvent struct {
	Kind    string            `json:"kind" enum:"secrets"`
	Secrets map[string]string `json:"secrets" doc:"By variable, the secret reference it is set from."`
}
