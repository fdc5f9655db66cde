package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
	"sluice/internal/errs"
	"sluice/internal/nodeproto"
	"sluice/internal/redact"
)

// apiTasks is an agent's Source: its node's tasks over the API.
type apiTasks struct {
	client   *apiclient.ClientWithResponses
	node     string
	instance string
	session  string
	// order puts each result's post wholly before or after a heartbeat.
	order *reportOrder
}

// claimer is how the claims of this session are named.
func (a *apiTasks) claimer() string { return a.instance + "/" + a.session }

// refused turns a refusal that retrying does not cure into a Permanent.
func refused(resp *http.Response, body []byte) error {
	err := redact.Error(apiclient.Problem(resp, body))
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict:
		return &Permanent{Err: err}
	case http.StatusNotFound:
		return errs.Errorf(errs.NotFound, "%s", err)
	}
	return err
}

// Claim implements Source.
func (a *apiTasks) Claim(ctx context.Context, wait time.Duration) (*nodeproto.Claimed, error) {
	resp, err := a.client.ClaimNodeTaskWithResponse(ctx, a.node, apiclient.ClaimNodeTaskJSONRequestBody{Instance: a.instance, Session: &a.session, WaitSec: int64(wait / time.Second)})
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode() == http.StatusNoContent:
		return nil, nil
	case resp.JSON200 == nil:
		return nil, refused(resp.HTTPResponse, resp.Body)
	}
	t := resp.JSON200
	id, err := uuid.Parse(t.Id)
	if err != nil {
		return nil, fmt.Errorf("task id %q: %w", t.Id, err)
	}
	run, _ := uuid.Parse(t.RunId)
	payload, err := json.Marshal(t.Payload)
	if err != nil {
		return nil, err
	}
	c := &nodeproto.Claimed{ID: id, Run: run, Kind: string(t.Kind), Payload: payload}
	if t.Secrets != nil {
		c.Secrets = make(map[string]nodeproto.Secret, len(*t.Secrets))
		for k, v := range *t.Secrets {
			c.Secrets[k] = nodeproto.Secret{Ref: v.Ref, Value: v.Value}
		}
	}
	return c, nil
}

// Events implements Source.
func (a *apiTasks) Events(ctx context.Context, id uuid.UUID, evs []nodeproto.Event) error {
	body := apiclient.PostNodeTaskEventsJSONRequestBody{Instance: a.claimer(), Events: make([]apiclient.NodeTaskEvent, len(evs))}
	for i, e := range evs {
		body.Events[i] = apiclient.NodeTaskEvent{Level: apiclient.NodeTaskEventLevel(e.Level), Message: e.Message}
		if len(e.Data) > 0 {
			body.Events[i].Data = e.Data
		}
	}
	resp, err := a.client.PostNodeTaskEventsWithResponse(ctx, a.node, id.String(), body)
	if err != nil {
		return err
	}
	if resp.JSON200 == nil {
		return refused(resp.HTTPResponse, resp.Body)
	}
	return nil
}

// Finish implements Source.
func (a *apiTasks) Finish(ctx context.Context, id uuid.UUID, res *nodeproto.Result) (*nodeproto.Finished, error) {
	r := apiclient.NodeTaskResult{}
	if res.Error != "" {
		r.Error = &res.Error
	}
	if len(res.Value) > 0 {
		r.Value = res.Value
	}
	if len(res.Phases) > 0 {
		ph := make([]apiclient.Phase, len(res.Phases))
		for i, p := range res.Phases {
			ph[i] = apiclient.Phase{Name: p.Name, Ms: p.Ms}
		}
		r.Phases = &ph
	}
	if a.order != nil {
		a.order.mu.RLock()
		defer a.order.posted()
	}
	resp, err := a.client.PostNodeTaskResultWithResponse(ctx, a.node, id.String(), apiclient.PostNodeTaskResultJSONRequestBody{Instance: a.claimer(), Result: r})
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, refused(resp.HTTPResponse, resp.Body)
	}
	return &nodeproto.Finished{Late: resp.JSON200.Late, Message: resp.JSON200.Message}, nil
}

// Fetcher reads an artifact's bytes from where a host gets them; the
// artifact cache verifies them against the digest whatever the source.
type Fetcher interface {
	Fetch(ctx context.Context, digest string) (io.ReadCloser, error)
}

// apiArtifacts fetches the artifacts a node's open tasks name over the API:
// the only ones its credential may download.
type apiArtifacts struct {
	client *apiclient.ClientWithResponses
	node   string
}

// Fetch implements Fetcher.
func (a *apiArtifacts) Fetch(ctx context.Context, digest string) (io.ReadCloser, error) {
	resp, err := a.client.GetNodeArtifact(ctx, a.node, digest)
	if err != nil {
		return nil, fmt.Errorf("download artifact %s: %w", digest, redact.Error(err))
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("download artifact %s: %w", digest, redact.Error(apiclient.Problem(resp, body)))
	}
	return resp.Body, nil
}
