package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/auth"
	"sluice/internal/services"
)

// Service is what sluice knows of one service.
type Service struct {
	Name                  string         `json:"name"`
	UnitID                uuid.UUID      `json:"unitId" format:"uuid"`
	Path                  string         `json:"path" doc:"The unit file, relative to the repository root."`
	Status                string         `json:"status" enum:"pending,applied,failed" doc:"What the last finished action left: pending until one succeeds."`
	Runtime               ServiceRuntime `json:"runtime" doc:"spec.runtime; empty when the unit's spec does not parse." example:"exec"`
	PinnedDigest          string         `json:"pinnedDigest" doc:"The artifact digest Git pins."`
	RunningDigest         *string        `json:"runningDigest,omitempty" doc:"The digest the last finished action left running; absent when none runs or it is not known."`
	DesiredAhead          bool           `json:"desiredAhead" doc:"Git holds content (pin, env, args…) that no action applied yet: converge applies it."`
	PreviousHealthyDigest *string        `json:"previousHealthyDigest,omitempty" doc:"Where a rollback goes: the new digest of the latest succeeded run whose digest differs from the pin."`
	LastRun               *Run           `json:"lastRun,omitempty"`
	Queued                []Run          `json:"queued" doc:"Open runs of this service: the running one first, then the queued ones in the order they will run (converge first)."`
	Process               ServiceProcess `json:"process"`
	Paused                bool           `json:"paused" doc:"The service's queue is paused: a run under the pause health policy (spec.onProbeFailure) failed its probe, and later actions stay queued until an operator resumes it."`
	PausedBy              *uuid.UUID     `json:"pausedBy,omitempty" format:"uuid" doc:"The run whose failed probe paused the queue."`
	PausedAt              *time.Time     `json:"pausedAt,omitempty"`
	PauseReason           string         `json:"pauseReason,omitempty" doc:"That run's failure, in one sentence."`
}

// ServiceProcess is what runs on the host, read from the supervisor and the
// rendered unit on disk.
type ServiceProcess struct {
	Running      bool   `json:"running"`
	Pid          int    `json:"pid,omitempty"`
	UnitDigest   string `json:"unitDigest,omitempty" doc:"The artifact the rendered unit on disk names."`
	RenderedHash string `json:"renderedHash,omitempty" doc:"sha256 of the rendered unit on disk."`
	LastExit     string `json:"lastExit,omitempty" doc:"Why no process runs, when none does."`
}

func serviceOut(v *services.View) Service {
	out := Service{
		Name: v.Unit.Name, UnitID: v.Unit.ID, Path: v.Unit.Path, Status: v.Unit.Status,
		RunningDigest: v.Unit.RunningDigest, DesiredAhead: v.DesiredAhead(), Queued: []Run{},
		Process: ServiceProcess{
			Running: v.Process.Running, Pid: v.Process.Pid, UnitDigest: v.Process.UnitDigest,
			RenderedHash: v.Process.RenderedHash, LastExit: v.Process.LastExit,
		},
	}
	if v.Spec != nil {
		out.Runtime, out.PinnedDigest = ServiceRuntime(v.Spec.Runtime), v.Spec.Digest()
	}
	if v.PreviousHealthyDigest != "" {
		out.PreviousHealthyDigest = &v.PreviousHealthyDigest
	}
	if p := v.Pause; p != nil {
		out.Paused, out.PausedBy, out.PausedAt, out.PauseReason = true, &p.RunID, &p.PausedAt, p.Reason
	}
	out.LastRun = runPtr(v.LastRun)
	for _, r := range v.Queue {
		out.Queued = append(out.Queued, runOut(r))
	}
	return out
}

type listServicesInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"8192" doc:"nextCursor from the previous page."`
}

type listServicesOutput struct {
	Body struct {
		Services   []Service `json:"services" doc:"Ordered by name."`
		NextCursor string    `json:"nextCursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

type serviceNameInput struct {
	Name string `path:"name" maxLength:"63" doc:"The service's metadata.name." example:"web"`
}

type getServiceOutput struct{ Body Service }

type deployInput struct {
	Name string `path:"name" maxLength:"63" doc:"The service's metadata.name." example:"web"`
	Body struct {
		Digest         string `json:"digest" maxLength:"200" doc:"The artifact to run: sha256:<64 hex> or name@sha256:<64 hex>. For a Compose project, the image digest of composeService: its pin becomes its repository at this digest." example:"sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"`
		ComposeService string `json:"composeService,omitempty" maxLength:"200" doc:"For a Compose project, required: the Compose service whose pin in spec.compose.images the deploy moves. Refused for a service of another runtime, which has one pin." example:"web"`
	}
}

func registerServices(api huma.API, d Deps) {
	register(api, d, op("list-services", http.MethodGet, "/services",
		"List the services, ordered by name: pin, running digest, what Git holds ahead, queue and process.",
		auth.RoleViewer, http.StatusUnprocessableEntity),
		func(ctx context.Context, in *listServicesInput) (*listServicesOutput, error) {
			p := services.ListPageParams{Limit: min(max(in.Limit, 1), 1000)}
			if in.Cursor != "" {
				name, id, err := decodeCursor(in.Cursor)
				if err != nil {
					return nil, err
				}
				p.AfterName, p.AfterID = name, id
			}
			views, more, err := d.Services.ListPage(ctx, p)
			if err != nil {
				return nil, err
			}
			out := &listServicesOutput{}
			out.Body.Services = make([]Service, 0, len(views))
			for _, v := range views {
				out.Body.Services = append(out.Body.Services, serviceOut(v))
			}
			if more {
				last := views[len(views)-1].Unit
				out.Body.NextCursor = encodeCursor(last.Name, last.ID)
			}
			return out, nil
		})

	register(api, d, op("get-service", http.MethodGet, "/services/{name}", "Get one service.", auth.RoleViewer, http.StatusNotFound),
		func(ctx context.Context, in *serviceNameInput) (*getServiceOutput, error) {
			v, err := d.Services.Get(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			return &getServiceOutput{Body: serviceOut(v)}, nil
		})

	o := op("deploy-service", http.MethodPost, "/services/{name}/deploy",
		"Deploy the service to a digest: at its turn, sync, pin the digest in Git (commit and push), render, restart and probe; "+
			"a failed probe is handled by spec.onProbeFailure (default rollback: revert the pin and restore the previous unit). Joins a queued deploy of the same digest. "+
			"A Compose project's deploy names the Compose service whose pin it moves (composeService); its run goes from one project identity to another. "+
			"409 when Git already pins that digest (converge instead), when composeService names a Compose service without a pin (pin it in Git first) or is given for a service of another runtime; "+
			"422 for a malformed digest, one not in the artifact store, or a Compose project's deploy without composeService or with one its files do not declare.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *deployInput) (*ActionAccepted, error) {
		res, err := d.Services.RequestDeployCompose(ctx, in.Name, in.Body.ComposeService, in.Body.Digest, requester(ctx))
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	o = op("rollback-service", http.MethodPost, "/services/{name}/rollback",
		"Deploy the previous healthy digest. 409 when there is none.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *serviceNameInput) (*ActionAccepted, error) {
		res, err := d.Services.RequestRollback(ctx, in.Name, requester(ctx))
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	o = op("drift-check-service", http.MethodPost, "/services/{name}/drift-check",
		"Check the service for drift: desired_ahead when Git moved past the last apply (the pin or the content), "+
			"live_drift when what runs is not what was applied (the unit file on disk, the process, its probe). The result lists each finding with its proof.",
		auth.RoleOperator, http.StatusNotFound)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *serviceNameInput) (*ActionAccepted, error) {
		res, err := d.Services.RequestDriftCheck(ctx, in.Name, requester(ctx))
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	o = op("resume-service", http.MethodPost, "/services/{name}/resume",
		"Resume the service's queue, paused by a run under the pause health policy (spec.onProbeFailure) whose probe failed: "+
			"a journaled run removes the pause, and the queued actions run again, in their order. 409 when it is not paused.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *serviceNameInput) (*ActionAccepted, error) {
		res, err := d.Services.RequestResume(ctx, in.Name, requester(ctx))
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	o = op("converge-service", http.MethodPost, "/services/{name}/converge",
		"Apply what the branch holds (env, args, template…) at the front of the service's queue: sync, render, restart, probe. "+
			"No commit; a failed probe is handled by spec.onProbeFailure (default stop: the process is stopped). Joins a queued converge (joined: true), never a running one or a deploy.",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *serviceNameInput) (*ActionAccepted, error) {
		res, err := d.Services.RequestConverge(ctx, in.Name, requester(ctx))
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	o = op("stop-service", http.MethodPost, "/services/{name}/stop",
		"Stop the service's process where it runs, in its queue. sluice starts it again only on a converge, deploy or "+
			"rollback: its status reads Stopped, and drift mode enforce leaves it. Joins a queued stop (joined: true).",
		auth.RoleOperator, http.StatusNotFound, http.StatusConflict)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *serviceNameInput) (*ActionAccepted, error) {
		res, err := d.Services.RequestStop(ctx, in.Name, requester(ctx))
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})

	o = op("destroy-service-data", http.MethodPost, "/services/{name}/destroy-data",
		"Destroy a compose service's data, for good: in its queue, on its node, Compose takes the project down with its "+
			"volumes (down -v --remove-orphans) and the volumes the project owns are removed; a volume it declares external and "+
			"any bind-mounted host path are never touched. The body must name the service again ({\"confirm\": \"web\"}): "+
			"without it, or with another name, the answer is 422 and nothing is queued. sluice itself never asks for this. "+
			"The service then reads Stopped until a converge, deploy or rollback brings the project back, with empty volumes. "+
			"409 for a service of another runtime. Joins a queued destroy (joined: true).",
		auth.RoleAdmin, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *destroyDataInput) (*ActionAccepted, error) {
		confirm := ""
		if in.Body != nil {
			confirm = in.Body.Confirm
		}
		res, err := d.Services.RequestDestroyData(ctx, in.Name, confirm, requester(ctx))
		if err != nil {
			return nil, err
		}
		return accepted(res), nil
	})
}

// destroyDataInput is a request to destroy a service's data: the body
// names the service again. Its schema leaves confirm optional so that a
// request without it gets the sentence that says what to send.
type destroyDataInput struct {
	Name string `path:"name" maxLength:"63" doc:"The service's metadata.name." example:"web"`
	Body *struct {
		Confirm string `json:"confirm,omitempty" maxLength:"63" doc:"The service's name again, as typed by the operator who means it: the destroy cannot be undone." example:"web"`
	}
}

// runPtr is runOut of a run that may be absent.
func runPtr(r *db.JournalRun) *Run {
	if r == nil {
		return nil
	}
	out := runOut(r)
	return &out
}
