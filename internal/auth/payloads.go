package auth

import "github.com/google/uuid"

// What the token receipts record: never a token's secret. Each is the
// schema of its action's params or result in the API (httpapi's
// runPayloads).

// CreateParams are a create_token receipt's.
type CreateParams struct {
	Name string `json:"name" doc:"The token's name."`
	Role Role   `json:"role" enum:"viewer,operator,admin" doc:"Its role."`
}

// RevokeParams are a revoke_token receipt's: how the token was named.
type RevokeParams struct {
	Ref string `json:"ref" doc:"The name or id the revoke was asked with."`
}

// TokenResult is a create_token's or a revoke_token's result: the token's
// id (and, for a revoke, the role it had).
type TokenResult struct {
	ID   uuid.UUID `json:"id" format:"uuid" doc:"The token's id."`
	Role string    `json:"role,omitempty" enum:"viewer,operator,admin" doc:"The role the revoked token had."`
}
