package blueprint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"sluice/db"
	"sluice/internal/hoststep"
)

// inStore reports whether a rollout finds its artifact digest: in sluice's
// artifact store or, when pulled (a container image the nodes' engines
// pull from its registry, checking its digest as they pull), without
// asking the store at all.
func inStore(ctx context.Context, q *db.Queries, pulled bool, digest string) (bool, error) {
	if pulled {
		return true, nil
	}
	_, err := q.ArtifactGet(ctx, digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up artifact %s: %w", digest, err)
	}
	return true, nil
}

// pulledByEngine reports whether manifest runs a container image pulled
// from a registry, rather than an artifact of sluice's store (a file, or an
// image's OCI archive).
func pulledByEngine(manifest []byte) bool {
	var req hoststep.ApplyRequest
	return json.Unmarshal(manifest, &req) == nil && req.Container != nil && !req.Container.Archive
}
