package blueprint

import (
	"time"

	"github.com/google/uuid"
)

// The parameters the Blueprint actions' runs record. Each is the schema of
// its action's params in the API (httpapi's runPayloads), so they are named
// types, not maps.

// ApproveParams are an approve_placement receipt's: the plan approved.
type ApproveParams struct {
	Fingerprint string   `json:"fingerprint" doc:"The approved plan's fingerprint."`
	Nodes       []string `json:"nodes" doc:"The nodes the placement names."`
	Add         []string `json:"add" doc:"The nodes the plan added."`
	Remove      []string `json:"remove" doc:"The nodes the plan removed."`
	Policy      string   `json:"policy" enum:"operator,bounded-auto" doc:"Who approved: operator, or the bounded-auto policy."`
	Generation  string   `json:"generation" doc:"The Blueprint's content hash approved."`
}

// DeclineParams are a decline_placement receipt's: the plan the bounded-auto
// policy left to an operator.
type DeclineParams struct {
	Fingerprint string    `json:"fingerprint" doc:"The declined plan's fingerprint."`
	Add         []string  `json:"add" doc:"The nodes the plan would add."`
	Remove      []string  `json:"remove" doc:"The nodes the plan would remove."`
	RecordedAt  time.Time `json:"recordedAt" doc:"When the decline was first recorded."`
}

// WithdrawApprovalParams are a withdraw_approval receipt's.
type WithdrawApprovalParams struct {
	Placement  uuid.UUID `json:"placement" format:"uuid" doc:"The placement whose approval is withdrawn."`
	ApprovedIn uuid.UUID `json:"approvedIn" format:"uuid" doc:"The run that approved it."`
	Nodes      []string  `json:"nodes" doc:"The nodes it named."`
}

// AuthorizeParams are an authorize_rollout receipt's.
type AuthorizeParams struct {
	Rollout        uuid.UUID `json:"rollout" format:"uuid" doc:"The rollout authorized."`
	Generation     string    `json:"generation" doc:"The Blueprint's content hash it rolls out."`
	Digest         string    `json:"digest" doc:"The artifact it rolls out."`
	Placement      uuid.UUID `json:"placement" format:"uuid" doc:"The placement it was authorized for."`
	Nodes          []string  `json:"nodes" doc:"The nodes, in rollout order."`
	Policy         string    `json:"policy" enum:"manual,automatic" doc:"The rollout policy that authorized it: manual or automatic."`
	OnProbeFailure string    `json:"onProbeFailure" doc:"What a node's failed probe does to the rollout."`
}

// RollbackRolloutParams are a rollback_rollout receipt's.
type RollbackRolloutParams struct {
	Rollout    uuid.UUID `json:"rollout" format:"uuid" doc:"The rollback's own rollout."`
	RollsBack  uuid.UUID `json:"rollsBack" format:"uuid" doc:"The rollout it rolls back."`
	To         uuid.UUID `json:"to" format:"uuid" doc:"The rollout whose generation it goes back to."`
	Generation string    `json:"generation" doc:"The generation it goes back to."`
	Digest     string    `json:"digest" doc:"The artifact it goes back to."`
	Scope      string    `json:"scope" enum:"all,failed" doc:"The nodes it covers: all, or those that took the rolled-back rollout."`
	Nodes      []string  `json:"nodes" doc:"The nodes, in order."`
}

// PauseParams are a pause_rollout receipt's.
type PauseParams struct {
	Rollout uuid.UUID `json:"rollout" format:"uuid" doc:"The rollout paused."`
	Reason  string    `json:"reason" doc:"Why, as the operator said."`
}

// ResumeRolloutParams are a resume_rollout receipt's, for a paused rollout
// whose run went on.
type ResumeRolloutParams struct {
	Rollout uuid.UUID `json:"rollout" format:"uuid" doc:"The rollout resumed."`
	Run     uuid.UUID `json:"run" format:"uuid" doc:"The rollout's run, which goes on."`
}

// SkipNodeParams are a skip_node receipt's.
type SkipNodeParams struct {
	Rollout uuid.UUID `json:"rollout" format:"uuid" doc:"The rollout the node is left out of."`
	Node    string    `json:"node" doc:"The node left out."`
	Reason  string    `json:"reason" doc:"Why, as the operator said."`
}

// RolloutParams are a rollout run's: the rollout it works and, when it is a
// resume or a rollback, what it continues.
type RolloutParams struct {
	Rollout     uuid.UUID  `json:"rollout" format:"uuid" doc:"The rollout this run works."`
	Generation  string     `json:"generation" doc:"The generation it rolls out."`
	By          string     `json:"by,omitempty" enum:"resume" doc:"resume when an operator ran the rollout again."`
	PausedBy    string     `json:"pausedBy,omitempty" doc:"Who had paused it, when a resume lifted a pause."`
	PauseReason string     `json:"pauseReason,omitempty" doc:"Why it had been paused."`
	RollsBack   *uuid.UUID `json:"rollsBack,omitempty" format:"uuid" doc:"The rollout a rollback rolls back."`
}

// NodeParams are a withdraw's or an enforce's: the node it works on and,
// for a withdraw, the placement that left the node out.
type NodeParams struct {
	Node      string     `json:"node" doc:"The node."`
	Placement *uuid.UUID `json:"placement,omitempty" format:"uuid" doc:"The placement the withdraw follows."`
}
