package services

import "github.com/google/uuid"

// The parameters a service action's run records: what asked for it, when
// more than its target says so. Each is the schema of its action's params
// in the API (httpapi's runPayloads), so they are named types, not maps.

// DeployParams are a deploy's: the digest it was asked for, and for a
// Compose project the Compose service whose pin moves to it.
type DeployParams struct {
	Digest         string `json:"digest" doc:"The digest the deploy was asked to run: for a Compose project, the image digest of composeService."`
	ComposeService string `json:"composeService,omitempty" doc:"For a Compose project, the Compose service whose pin in spec.compose.images the deploy moves to digest; absent for another runtime."`
}

// ConvergeParams are a converge's, when something other than an operator
// asked for it: drift mode enforce (DriftCheck, Reason) or the rotation of
// a secret (the rest). An operator's converge records none.
type ConvergeParams struct {
	DriftCheck *uuid.UUID `json:"driftCheck,omitempty" format:"uuid" doc:"The drift check whose finding this converge repairs (drift mode enforce)."`
	Reason     string     `json:"reason,omitempty" doc:"Why it was asked for, when not by an operator."`
	// The rotation of a secret this converge applies.
	Secret  string     `json:"secret,omitempty" doc:"The rotated secret's target (its name and scope)."`
	Name    string     `json:"name,omitempty" doc:"The rotated secret's name."`
	Scope   string     `json:"scope,omitempty" doc:"The rotated secret's scope: a source's name, or empty for global."`
	Version int32      `json:"version,omitempty" doc:"The secret version this converge applies."`
	ID      *uuid.UUID `json:"secretId,omitempty" format:"uuid" doc:"The rotated secret's id."`
	SetRun  *uuid.UUID `json:"setRun,omitempty" format:"uuid" doc:"The set_secret run that made this version."`
}

// DriftCheckParams are a drift check's, when a sweep asked for it.
type DriftCheckParams struct {
	Sweep *uuid.UUID `json:"sweep,omitempty" format:"uuid" doc:"The sweep run that asked for this check."`
}

// ResumeParams are a resume's: the run whose failure paused the queue.
type ResumeParams struct {
	PausedBy uuid.UUID `json:"pausedBy" format:"uuid" doc:"The run whose failed probe paused the service's queue."`
}
