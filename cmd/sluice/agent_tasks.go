package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"sluice/internal/apiclient"
	"sluice/internal/artifact"
	"sluice/internal/errs"
	"sluice/internal/hoststep"
	"sluice/internal/nodetask"
	"sluice/internal/redact"
)

// apiTasks is an agent's nodetask.Source: its node's tasks over the API.
type apiTasks struct {
	client   *apiclient.ClientWithResponses
	node     string
	instance string
	session  string
}

// claimer is how the claims of this session are named.
func (a *apiTasks) claimer() string { return a.instance + "/" + a.session }

// refused turns a refusal that retrying does not cure into a Permanent.
func refused(resp *http.Response, body []byte) error {
	err := redact.Error(apiError(resp, body))
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict:
		return &nodetask.Permanent{Err: err}
	case http.StatusNotFound:
		return errs.Errorf(errs.NotFound, "%s", err)
	}
	return err
}

func (a *apiTasks) Claim(ctx context.Context, wait time.Duration) (*nodetask.Claimed, error) {
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
	return &nodetask.Claimed{ID: id, Run: run, Kind: string(t.Kind), Payload: payload}, nil
}

func (a *apiTasks) Events(ctx context.Context, id uuid.UUID, evs []nodetask.Event) error {
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

func (a *apiTasks) Finish(ctx context.Context, id uuid.UUID, res *nodetask.Result) (*nodetask.Finished, error) {
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
	resp, err := a.client.PostNodeTaskResultWithResponse(ctx, a.node, id.String(), apiclient.PostNodeTaskResultJSONRequestBody{Instance: a.claimer(), Result: r})
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, refused(resp.HTTPResponse, resp.Body)
	}
	return &nodetask.Finished{Late: resp.JSON200.Late, Message: resp.JSON200.Message}, nil
}

// agentHost is the agent's host: its processes and units under its data
// dir, and the artifacts its tasks name, fetched over the API and verified
// against their digest before they run.
func agentHost(dataDir string, client *apiclient.ClientWithResponses, node string) *hoststep.Host {
	cache := &artifact.Cache{Dir: filepath.Join(dataDir, "artifacts"), Fetch: func(ctx context.Context, digest string) (io.ReadCloser, error) {
		resp, err := client.GetNodeArtifact(ctx, node, digest)
		if err != nil {
			return nil, fmt.Errorf("download artifact %s: %w", digest, redact.Error(err))
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			return nil, fmt.Errorf("download artifact %s: %w", digest, redact.Error(apiError(resp, body)))
		}
		return resp.Body, nil
	}}
	return hoststep.New(dataDir, cache)
}
