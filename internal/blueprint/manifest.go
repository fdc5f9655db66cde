package blueprint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/hoststep"
	"sluice/internal/journal"
	"sluice/internal/secrets"
	"sluice/internal/services"
)

// rolloutManifest is what a rollout row keeps of its template: the request
// each node's step is handed, and the name of the secret its images are
// pulled with. The name only: the value is opened at each node's step
// (withPull), so that it is stored nowhere and a secret rotated during a
// rollout reaches the nodes after the rotation.
type rolloutManifest struct {
	hoststep.ApplyRequest
	// PullSecret names the secret holding the registry's credentials; ""
	// when the images are pulled without, and in a rollout authorized
	// before templates took one.
	PullSecret string `json:"pullSecret,omitempty"`
}

// readManifest reads rollout r's manifest.
func readManifest(r *db.Rollout) (rolloutManifest, error) {
	var m rolloutManifest
	if err := json.Unmarshal(r.Manifest, &m); err != nil {
		return m, fmt.Errorf("read the manifest of rollout %s: %w", r.ID, err)
	}
	return m, nil
}

// pullField is the template's field that names m's pull secret.
func (m rolloutManifest) pullField() string {
	return "spec.template." + m.Runtime + ".pullSecret"
}

// withPull is the request of m that node's step hands the node: with the
// value of m's pull secret, as a unit of the Blueprint's source (unitID's)
// sees it now, under hoststep.PullSecretKey, where the task seals it on its
// way to the node and the runtime hands it to the engine's pull. The run's
// event names the secret and its version, never the value. A secret that
// does not resolve is an error that names it and its field; the node's step
// has not begun, so nothing on it changed.
func (s *Service) withPull(ctx context.Context, p *journal.Progress, unitID uuid.UUID, blueprint, node string, m rolloutManifest) (hoststep.ApplyRequest, error) {
	req := m.ApplyRequest
	if m.PullSecret == "" {
		return req, nil
	}
	// Not an errs.Error: the run's error keeps what the step wraps it in
	// (the rollout, the node, what the other nodes run).
	fail := func(err error) error {
		return fmt.Errorf("The images of Blueprint %s are pulled with secret %s (%s), which does not resolve for node %s, so nothing was changed there: %s",
			blueprint, m.PullSecret, m.pullField(), node, strings.TrimSuffix(err.Error(), "."))
	}
	store := s.secretStore()
	if store == nil {
		return req, fail(errors.New("this process keeps no secrets; run it under serve or worker"))
	}
	u, err := db.New(s.Pool).UnitGet(ctx, unitID)
	if err != nil {
		return req, fmt.Errorf("read the unit of Blueprint %s: %w", blueprint, err)
	}
	v, err := services.PullSecret(ctx, store, s.Pool, u.SourceID, m.PullSecret)
	if err != nil {
		return req, fail(err)
	}
	p.Info(ctx, fmt.Sprintf("node %s: registry credentials for the pull: %s", node, v.Ref), nil)
	req.Secrets = map[string]hoststep.SecretValue{hoststep.PullSecretKey: v}
	return req, nil
}

// secretStore is the store a template's pull secret is opened from; nil
// when this process keeps none.
func (s *Service) secretStore() *secrets.Service {
	if s.Secrets != nil {
		return s.Secrets
	}
	if s.GitOps != nil {
		return s.GitOps.Secrets
	}
	return nil
}
