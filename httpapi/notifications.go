package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/db"
	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/notify"
)

// NotificationTarget is where sluice tells people that a run needs them.
// Its URL's path and query, and its secret, are never shown.
type NotificationTarget struct {
	ID        uuid.UUID `json:"id" format:"uuid"`
	Name      string    `json:"name" example:"pager"`
	Kind      string    `json:"kind" enum:"http,slack" doc:"http: a JSON POST signed with the secret (X-Sluice-Signature-256: sha256= and the hex HMAC-SHA256 of the body); slack: a Slack-compatible incoming webhook."`
	Source    string    `json:"source,omitempty" doc:"The source whose runs it takes; absent for every run." example:"apps"`
	Events    []string  `json:"events" doc:"The events it takes: run_failed, run_unknown, run_recovered, drift_found, repair_held."`
	URL       string    `json:"url" doc:"The URL's scheme and host; /… when it has a path or query, which are never shown." example:"https://hooks.example.com/…"`
	SecretSet bool      `json:"secretSet" doc:"An http target signs its bodies with its secret, which is never shown."`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

func notificationTargetOut(t *notify.Target) NotificationTarget {
	return NotificationTarget{ID: t.ID, Name: t.Name, Kind: t.Kind, Source: t.Source, Events: nonNil(t.Events), URL: t.URL,
		SecretSet: t.SecretSet, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt}
}

// NotificationDelivery is one event told, or not, to one target.
type NotificationDelivery struct {
	ID          uuid.UUID  `json:"id" format:"uuid"`
	Target      string     `json:"target" doc:"The target's name (kept after it is deleted)." example:"pager"`
	TargetGone  bool       `json:"targetGone" doc:"The target was deleted since."`
	Event       string     `json:"event" enum:"run_failed,run_unknown,run_recovered,drift_found,repair_held,test"`
	RunID       uuid.UUID  `json:"runId" format:"uuid" doc:"The run it is about."`
	Revision    string     `json:"revision,omitempty" doc:"The run's commit or digest, part of what makes two deliveries the same."`
	ErrorClass  string     `json:"errorClass,omitempty" doc:"The class of the run's error or drift, part of what makes two deliveries the same."`
	Reason      string     `json:"reason" doc:"The payload's one sentence."`
	State       string     `json:"state" enum:"pending,delivered,gave_up,deduplicated" doc:"pending: being sent (River retries); gave_up: every attempt failed; deduplicated: duplicateOf, sent within the window for the same target, event, object, revision and error class, covers it."`
	DuplicateOf *uuid.UUID `json:"duplicateOf,omitempty" format:"uuid"`
	Duplicates  int32      `json:"duplicates" doc:"How many later deliveries this one covers."`
	Attempts    int32      `json:"attempts"`
	LastError   *string    `json:"lastError,omitempty" doc:"The last failed attempt, in a sentence."`
	LastStatus  *int32     `json:"lastStatus,omitempty" doc:"The HTTP status of the last failed attempt, when the target answered."`
	RiverJobID  *int64     `json:"riverJobId,omitempty" doc:"The River job that sends it (see River UI)."`
	CreatedAt   time.Time  `json:"createdAt"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
}

func notificationDeliveryOut(d *db.NotificationDelivery) NotificationDelivery {
	return NotificationDelivery{
		ID: d.ID, Target: d.TargetName, TargetGone: d.TargetID == nil, Event: d.Event, RunID: d.RunID, Revision: d.Revision,
		ErrorClass: d.ErrorClass, Reason: d.Reason, State: d.State, DuplicateOf: d.DuplicateOf, Duplicates: d.Duplicates,
		Attempts: d.Attempts, LastError: d.LastError, LastStatus: d.LastStatus, RiverJobID: d.RiverJobID,
		CreatedAt: d.CreatedAt, FinishedAt: d.FinishedAt,
	}
}

// NotificationTargetInput creates a notification target.
type NotificationTargetInput struct {
	Name   string   `json:"name" minLength:"1" maxLength:"63" doc:"1 to 63 lowercase letters, digits, '.', '_' or '-'." example:"pager"`
	Kind   string   `json:"kind" enum:"http,slack"`
	URL    string   `json:"url" minLength:"1" maxLength:"2048" writeOnly:"true" doc:"An http or https URL, with no user name or password. Stored sealed; only its scheme and host are shown back." example:"https://hooks.example.com/sluice"`
	Secret string   `json:"secret,omitempty" maxLength:"256" writeOnly:"true" doc:"http: the secret that signs the bodies (16 to 256 bytes), stored sealed and never shown back. slack: none." example:"3f7c2b0e9a4d4e1f8b6a5c2d7e9f0a1b"`
	Source string   `json:"source,omitempty" maxLength:"63" doc:"A source's name or id: the target takes only the runs of its syncs and units. Omitted: every run." example:"apps"`
	Events []string `json:"events,omitempty" maxItems:"5" enum:"run_failed,run_unknown,run_recovered,drift_found,repair_held" doc:"The events it takes (one named twice counts once); omitted: all of them." example:"[\"run_failed\",\"run_recovered\"]"`
}

type createNotificationTargetInput struct{ Body NotificationTargetInput }

type notificationTargetOutput struct{ Body NotificationTarget }

type listNotificationTargetsOutput struct {
	Body struct {
		Targets []NotificationTarget `json:"targets" doc:"By name."`
	}
}

type notificationTargetRef struct {
	Name string `path:"name" maxLength:"63" doc:"The target's name." example:"pager"`
}

// NotificationTestAccepted answers a test send: its receipt and its
// delivery, which River sends (and retries) as any other.
type NotificationTestAccepted struct {
	JournalID  uuid.UUID `json:"journalId" format:"uuid" doc:"The test send's receipt; GET /api/v1/journal/{id}/notifications shows its delivery."`
	DeliveryID uuid.UUID `json:"deliveryId" format:"uuid"`
	State      string    `json:"state" enum:"pending,delivered,gave_up,deduplicated" doc:"The delivery's state when answered."`
}

type notificationTestOutput struct {
	Location string `header:"Location" doc:"The receipt's deliveries."`
	Body     NotificationTestAccepted
}

type runNotificationsInput struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

type listRunNotificationsOutput struct {
	Body struct {
		Deliveries []NotificationDelivery `json:"deliveries" doc:"Oldest first."`
	}
}

func registerNotifications(api huma.API, d Deps) {
	unavailable := func() error {
		return errs.Errorf(errs.Unavailable, "This server sends no notifications.")
	}
	register(api, d, op("list-notification-targets", http.MethodGet, "/notifications/targets",
		"List the notification targets, by name (never their URLs' paths or secrets).", auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*listNotificationTargetsOutput, error) {
			if d.Notify == nil {
				return nil, unavailable()
			}
			ts, err := d.Notify.ListTargets(ctx)
			if err != nil {
				return nil, err
			}
			out := &listNotificationTargetsOutput{}
			out.Body.Targets = make([]NotificationTarget, 0, len(ts))
			for _, t := range ts {
				out.Body.Targets = append(out.Body.Targets, notificationTargetOut(t))
			}
			return out, nil
		})

	o := op("create-notification-target", http.MethodPost, "/notifications/targets",
		"Create a notification target: an http URL that gets signed JSON POSTs, or a Slack-compatible incoming webhook, "+
			"for every run or one source's. Runs that fail, end unknown, recover, find drift or hold a repair are told, "+
			"once per target, event, object, revision and error class within the deduplication window. The URL and the secret are write-only.",
		auth.RoleAdmin, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusServiceUnavailable)
	o.DefaultStatus = http.StatusCreated
	register(api, d, o, func(ctx context.Context, in *createNotificationTargetInput) (*notificationTargetOutput, error) {
		if d.Notify == nil {
			return nil, unavailable()
		}
		t, err := d.Notify.CreateTarget(ctx, notify.TargetInput{
			Name: in.Body.Name, Kind: in.Body.Kind, URL: in.Body.URL, Secret: in.Body.Secret, Source: in.Body.Source, Events: in.Body.Events,
		}, requester(ctx))
		if err != nil {
			return nil, err
		}
		return &notificationTargetOutput{Body: notificationTargetOut(t)}, nil
	})

	o = op("delete-notification-target", http.MethodDelete, "/notifications/targets/{name}",
		"Delete a notification target. Its deliveries stay on their runs; one still pending gives up.",
		auth.RoleAdmin, http.StatusNotFound, http.StatusServiceUnavailable)
	o.DefaultStatus = http.StatusNoContent
	register(api, d, o, func(ctx context.Context, in *notificationTargetRef) (*struct{}, error) {
		if d.Notify == nil {
			return nil, unavailable()
		}
		return &struct{}{}, d.Notify.DeleteTarget(ctx, in.Name, requester(ctx))
	})

	o = op("test-notification-target", http.MethodPost, "/notifications/targets/{name}/test",
		"Send a test notification to a target: a receipt, and a delivery River sends and retries as any other, never deduplicated.",
		auth.RoleOperator, http.StatusNotFound, http.StatusServiceUnavailable)
	o.DefaultStatus = http.StatusAccepted
	register(api, d, o, func(ctx context.Context, in *notificationTargetRef) (*notificationTestOutput, error) {
		if d.Notify == nil {
			return nil, unavailable()
		}
		run, dl, err := d.Notify.TestSend(ctx, in.Name, requester(ctx))
		if err != nil {
			return nil, err
		}
		return &notificationTestOutput{
			Location: Prefix + "/journal/" + run.ID.String() + "/notifications",
			Body:     NotificationTestAccepted{JournalID: run.ID, DeliveryID: dl.ID, State: dl.State},
		}, nil
	})

	register(api, d, op("list-run-notifications", http.MethodGet, "/journal/{id}/notifications",
		"List the notifications a run made: each target told, or covered by an earlier delivery (deduplicated), with its attempts.",
		auth.RoleViewer, http.StatusNotFound, http.StatusServiceUnavailable),
		func(ctx context.Context, in *runNotificationsInput) (*listRunNotificationsOutput, error) {
			if d.Notify == nil {
				return nil, unavailable()
			}
			ds, err := d.Notify.DeliveriesOfRun(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			out := &listRunNotificationsOutput{}
			out.Body.Deliveries = make([]NotificationDelivery, 0, len(ds))
			for _, dl := range ds {
				out.Body.Deliveries = append(out.Body.Deliveries, notificationDeliveryOut(dl))
			}
			return out, nil
		})
}
