package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/artifact"
	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/nodeproto"
	"sluice/internal/phase"
)

// NodeTask is a host step for a node's agent: what the step needs, and
// nothing more (no Git credential, no token, no other node's data).
type NodeTask struct {
	ID      uuid.UUID                 `json:"id"`
	RunID   uuid.UUID                 `json:"runId" doc:"The run whose job waits on the step; the step's events go there."`
	Kind    string                    `json:"kind" enum:"apply,reprobe,stop,inspect,unit_text,destroy_data"`
	Payload json.RawMessage           `json:"payload" doc:"The step's input: the rendered manifest and digest, the probe, or the service's name."`
	Secrets map[string]NodeTaskSecret `json:"secrets,omitempty" doc:"The values of the secrets an apply step hands its service, by environment variable. Given once, with the claim; never part of the payload, and never kept once the step is over."`
}

// NodeTaskSecret is the value of one secret reference of a step.
type NodeTaskSecret struct {
	Ref   string `json:"ref" doc:"The reference as the unit writes it: name@version, or source/name@version for a secret of one source."`
	Value []byte `json:"value" doc:"The value's bytes."`
}

// NodeTaskEvent is one progress event of a step.
type NodeTaskEvent struct {
	Level   string          `json:"level" enum:"info,warn,error"`
	Message string          `json:"message" maxLength:"65536"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// NodeTaskResult is a step's result.
type NodeTaskResult struct {
	Value  json.RawMessage `json:"value,omitempty" doc:"The step's answer; absent when it failed."`
	Error  string          `json:"error,omitempty" maxLength:"65536" doc:"The step's error sentence; empty when it succeeded."`
	Phases []Phase         `json:"phases,omitempty" maxItems:"1000"`
}

// Phase is one timed step of a host step.
type Phase struct {
	Name string `json:"name" maxLength:"100"`
	Ms   int64  `json:"ms" minimum:"0"`
}

type nodeTaskClaimOutput struct {
	Status int
	Body   *NodeTask
}

type nodeTaskEventsOutput struct {
	Body struct {
		Dropped int `json:"dropped" doc:"Events not kept: the run had finished."`
	}
}

type nodeTaskFinishedOutput struct {
	Body struct {
		Late    bool   `json:"late" doc:"True when the run had ended: the result is kept on the task as the node's late report, and the receipt is unchanged."`
		Message string `json:"message"`
	}
}

// nodeRow is the node whose credential authenticated the request.
func nodeRow(ctx context.Context) (*db.Node, error) {
	row, _ := ctx.Value(nodeKey{}).(*db.Node)
	if row == nil {
		return nil, errs.Errorf(errs.Unauthorized, "This route is for a node's agent: send its node credential.")
	}
	return row, nil
}

func registerNodeTasks(api huma.API, d Deps) {
	noTasks := func() error {
		return errs.Errorf(errs.Unavailable, "This server dispatches no node tasks.")
	}
	co := op("claim-node-task", http.MethodPost, "/nodes/{name}/tasks/claim",
		"An agent's long poll for its node's next host step: 200 with the step, or 204 when none came within waitSec. "+
			"Authenticated by the node's credential; 409 when another agent holds the node.",
		auth.RoleNode, http.StatusConflict, http.StatusUnprocessableEntity)
	co.Responses = map[string]*huma.Response{"204": {Description: "No step came within waitSec: poll again."}}
	register(api, d, co, func(ctx context.Context, in *struct {
		Name string `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
		Body struct {
			Instance string `json:"instance" minLength:"1" maxLength:"100" doc:"The agent's instance, as its heartbeats give it."`
			Session  string `json:"session,omitempty" maxLength:"100" doc:"The agent process's session, as its heartbeats report it; the claim is \"instance/session\"."`
			WaitSec  int    `json:"waitSec" minimum:"0" maximum:"60" doc:"How long to hold the poll when no step is queued."`
		}
	}) (*nodeTaskClaimOutput, error) {
		if d.Tasks == nil {
			return nil, noTasks()
		}
		row, err := nodeRow(ctx)
		if err != nil {
			return nil, err
		}
		if err := d.Nodes.CheckHolder(row, in.Body.Instance); err != nil {
			return nil, err
		}
		claimer := in.Body.Instance
		if in.Body.Session != "" {
			claimer += "/" + in.Body.Session
		}
		t, err := d.Tasks.ClaimStep(ctx, row.Name, claimer, time.Duration(in.Body.WaitSec)*time.Second)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return &nodeTaskClaimOutput{Status: http.StatusNoContent}, nil
		}
		body := &NodeTask{ID: t.ID, RunID: t.Run, Kind: t.Kind, Payload: t.Payload}
		for k, v := range t.Secrets {
			if body.Secrets == nil {
				body.Secrets = map[string]NodeTaskSecret{}
			}
			body.Secrets[k] = NodeTaskSecret{Ref: v.Ref, Value: v.Value}
		}
		return &nodeTaskClaimOutput{Status: http.StatusOK, Body: body}, nil
	})

	eo := op("post-node-task-events", http.MethodPost, "/nodes/{name}/tasks/{id}/events",
		"An agent streams a step's events into its run. Authenticated by the node's credential; a task of another node is 403.",
		auth.RoleNode, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	eo.Metadata[hostReportKey] = true
	register(api, d, eo, func(ctx context.Context, in *struct {
		Name string    `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
		ID   uuid.UUID `path:"id" maxLength:"36"`
		Body struct {
			Instance string          `json:"instance" minLength:"1" maxLength:"201" doc:"The claim's \"instance/session\"."`
			Events   []NodeTaskEvent `json:"events" maxItems:"1000"`
		}
	}) (*nodeTaskEventsOutput, error) {
		if d.Tasks == nil {
			return nil, noTasks()
		}
		row, err := nodeRow(ctx)
		if err != nil {
			return nil, err
		}
		evs := make([]nodeproto.Event, len(in.Body.Events))
		for i, e := range in.Body.Events {
			evs[i] = nodeproto.Event{Level: e.Level, Message: e.Message, Data: e.Data}
		}
		dropped, err := d.Tasks.Events(ctx, row.Name, in.Body.Instance, in.ID, evs)
		if err != nil {
			return nil, err
		}
		out := &nodeTaskEventsOutput{}
		out.Body.Dropped = dropped
		return out, nil
	})

	ro := op("post-node-task-result", http.MethodPost, "/nodes/{name}/tasks/{id}/result",
		"An agent posts a step's result. Posting it again is harmless. A result for a run that has ended is kept on the task "+
			"as the node's late report; it never rewrites the receipt. Authenticated by the node's credential.",
		auth.RoleNode, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	ro.Metadata[hostReportKey] = true
	register(api, d, ro, func(ctx context.Context, in *struct {
		Name string    `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
		ID   uuid.UUID `path:"id" maxLength:"36"`
		Body struct {
			Instance string         `json:"instance" minLength:"1" maxLength:"201" doc:"The claim's \"instance/session\"."`
			Result   NodeTaskResult `json:"result"`
		}
	}) (*nodeTaskFinishedOutput, error) {
		if d.Tasks == nil {
			return nil, noTasks()
		}
		row, err := nodeRow(ctx)
		if err != nil {
			return nil, err
		}
		r := in.Body.Result
		res := &nodeproto.Result{Value: r.Value, Error: r.Error}
		for _, p := range r.Phases {
			res.Phases = append(res.Phases, phase.Phase{Name: p.Name, Ms: p.Ms})
		}
		f, err := d.Tasks.Finish(ctx, row.Name, in.Body.Instance, in.ID, res)
		if err != nil {
			return nil, err
		}
		out := &nodeTaskFinishedOutput{}
		out.Body.Late, out.Body.Message = f.Late, f.Message
		return out, nil
	})

	ao := op("get-node-artifact", http.MethodGet, "/nodes/{name}/artifacts/{digest}",
		"An agent downloads an artifact that one of its node's open steps names; any other is 403. Authenticated by the node's credential.",
		auth.RoleNode, http.StatusNotFound, http.StatusUnprocessableEntity)
	ao.Responses = map[string]*huma.Response{"200": {
		Description: "The artifact's bytes.",
		Content:     map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}},
	}}
	register(api, d, ao, func(ctx context.Context, in *struct {
		Name   string `path:"name" maxLength:"63" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"`
		Digest string `path:"digest" maxLength:"200" doc:"sha256:<hex>."`
	}) (*huma.StreamResponse, error) {
		if d.Tasks == nil {
			return nil, noTasks()
		}
		row, err := nodeRow(ctx)
		if err != nil {
			return nil, err
		}
		digest, err := artifact.ParseDigest(in.Digest)
		if err != nil {
			return nil, err
		}
		ok, err := d.Tasks.ArtifactAllowed(ctx, row.Name, digest)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errs.Errorf(errs.Forbidden, "No open step of node %s names artifact %s.", row.Name, digest)
		}
		info, err := d.Artifacts.Stat(ctx, digest)
		if err != nil {
			return nil, err
		}
		return streamArtifact(ctx, d, info)
	})
}
