package gitops

import (
	"context"
	"fmt"

	"sluice/db"
	"sluice/internal/servicespec"
)

// ArtifactCheck says whether a service's pinned digest was in the artifact
// store when its content was accepted.
type ArtifactCheck struct {
	Service string `json:"service"`
	Path    string `json:"path"`
	Digest  string `json:"digest"`
	InStore bool   `json:"inStore"`
}

// checkArtifactsTx checks, at acceptance, that each accepted service's
// pinned digest exists in the artifact store. A missing one does not stop
// the acceptance (the artifact may be pushed later); the receipt and the
// service's status say so.
func checkArtifactsTx(ctx context.Context, q *db.Queries, accepted []*db.Unit) ([]ArtifactCheck, error) {
	var checks []ArtifactCheck
	var digests []string
	for _, u := range accepted {
		if u.Kind != servicespec.Kind {
			continue
		}
		spec, err := servicespec.Parse(u.Name, u.Content)
		if err != nil || spec.PulledByEngine() {
			continue // checkSpecs admitted it, or its engine pulls the image from its registry
		}
		checks = append(checks, ArtifactCheck{Service: u.Name, Path: u.Path, Digest: spec.Digest()})
		digests = append(digests, spec.Digest())
	}
	if len(checks) == 0 {
		return nil, nil
	}
	present, err := q.ArtifactDigestsPresent(ctx, digests)
	if err != nil {
		return nil, fmt.Errorf("check the pinned artifacts: %w", err)
	}
	in := make(map[string]bool, len(present))
	for _, d := range present {
		in[d] = true
	}
	for i := range checks {
		checks[i].InStore = in[checks[i].Digest]
	}
	return checks, nil
}

// sampleArtifacts keeps SampleSize of checks, the missing artifacts first
// (an operator pushes those), and counts the missing ones.
func sampleArtifacts(checks []ArtifactCheck) (kept []ArtifactCheck, missing int) {
	if len(checks) <= SampleSize {
		for _, c := range checks {
			if !c.InStore {
				missing++
			}
		}
		return checks, missing
	}
	kept = make([]ArtifactCheck, 0, SampleSize)
	for _, c := range checks {
		if !c.InStore {
			missing++
			if len(kept) < SampleSize {
				kept = append(kept, c)
			}
		}
	}
	for _, c := range checks {
		if c.InStore && len(kept) < SampleSize {
			kept = append(kept, c)
		}
	}
	return kept, missing
}
