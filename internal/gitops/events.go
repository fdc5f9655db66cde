package gitops

import "github.com/google/uuid"

// EventJoinedSync is the kind of a sync_source event that says the run
// joined a sync another run began.
const EventJoinedSync = "joined_sync"

// JoinedSyncEvent is that event's data.
type JoinedSyncEvent struct {
	Kind     string    `json:"kind" enum:"joined_sync"`
	SyncedBy uuid.UUID `json:"syncedBy" format:"uuid" doc:"The run whose sync this run acted on."`
}
