package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/errs"
	"sluice/internal/metrics"
	"sluice/internal/webhook"
)

// WebhookAnswer is what a push delivery did.
type WebhookAnswer struct {
	Outcome   string     `json:"outcome" enum:"queued,joined,ignored" doc:"queued: the push queued a sync; joined: a sync that answers for it was queued, or runs for this commit; ignored: nothing to sync."`
	Reason    string     `json:"reason" doc:"Why, in a sentence."`
	Host      string     `json:"host" enum:"github,gitlab,gitea" doc:"The Git host the headers name (gitea covers Forgejo)."`
	Event     string     `json:"event" doc:"The host's event name." example:"push"`
	Delivery  string     `json:"delivery,omitempty" doc:"The host's delivery id, recorded on the sync it queued."`
	Commit    string     `json:"commit,omitempty" doc:"The pushed commit."`
	JournalID *uuid.UUID `json:"journalId,omitempty" format:"uuid" doc:"The sync that answers for the push; absent when ignored."`
}

type webhookOutput struct {
	Status   int
	Location string `header:"Location" doc:"The sync's URL, when one answers for the push."`
	Body     WebhookAnswer
}

// webhookInput is a delivery: the headers of the three hosts, and the body
// as sent, since its signature is over the exact bytes.
type webhookInput struct {
	Source           string `path:"source" maxLength:"63" doc:"The source's name or id." example:"default"`
	GitHubEvent      string `header:"X-GitHub-Event" maxLength:"100" doc:"GitHub: the event (push, ping)."`
	GitHubDelivery   string `header:"X-GitHub-Delivery" maxLength:"100" doc:"GitHub: the delivery id."`
	HubSignature256  string `header:"X-Hub-Signature-256" maxLength:"100" doc:"GitHub (and Gitea): sha256= and the hex HMAC-SHA256 of the body under the secret."`
	GitLabEvent      string `header:"X-Gitlab-Event" maxLength:"100" doc:"GitLab: the event (Push Hook)."`
	GitLabToken      string `header:"X-Gitlab-Token" maxLength:"256" doc:"GitLab: the secret token itself."`
	GitLabEventUUID  string `header:"X-Gitlab-Event-UUID" maxLength:"100" doc:"GitLab: the delivery id."`
	GitLabHookUUID   string `header:"X-Gitlab-Webhook-UUID" maxLength:"100" doc:"GitLab: the webhook's id."`
	GiteaEvent       string `header:"X-Gitea-Event" maxLength:"100" doc:"Gitea: the event (push)."`
	GiteaDelivery    string `header:"X-Gitea-Delivery" maxLength:"100" doc:"Gitea: the delivery id."`
	GiteaSignature   string `header:"X-Gitea-Signature" maxLength:"100" doc:"Gitea: the hex HMAC-SHA256 of the body under the secret."`
	ForgejoEvent     string `header:"X-Forgejo-Event" maxLength:"100" doc:"Forgejo: the event (push)."`
	ForgejoDelivery  string `header:"X-Forgejo-Delivery" maxLength:"100" doc:"Forgejo: the delivery id."`
	ForgejoSignature string `header:"X-Forgejo-Signature" maxLength:"100" doc:"Forgejo: the hex HMAC-SHA256 of the body under the secret."`
	RawBody          []byte
}

func (in *webhookInput) delivery() webhook.Delivery {
	h := http.Header{}
	for name, v := range map[string]string{
		"X-GitHub-Event": in.GitHubEvent, "X-GitHub-Delivery": in.GitHubDelivery, "X-Hub-Signature-256": in.HubSignature256,
		"X-Gitlab-Event": in.GitLabEvent, "X-Gitlab-Token": in.GitLabToken, "X-Gitlab-Event-UUID": in.GitLabEventUUID,
		"X-Gitlab-Webhook-UUID": in.GitLabHookUUID,
		"X-Gitea-Event":         in.GiteaEvent, "X-Gitea-Delivery": in.GiteaDelivery, "X-Gitea-Signature": in.GiteaSignature,
		"X-Forgejo-Event": in.ForgejoEvent, "X-Forgejo-Delivery": in.ForgejoDelivery, "X-Forgejo-Signature": in.ForgejoSignature,
	} {
		if v != "" {
			h.Set(name, v)
		}
	}
	return webhook.Delivery{Header: h, Body: in.RawBody}
}

const webhookOpID = "receive-source-webhook"

func registerWebhooks(api huma.API, d Deps) {
	summary := "Receive a Git host's push webhook for a source: GitHub (X-Hub-Signature-256), GitLab (X-Gitlab-Token) " +
		"or Gitea/Forgejo (X-Gitea-Signature), checked in constant time against the source's webhook secret. " +
		"A push to the tracked branch answers 202 with the sync that answers for it: duplicate deliveries of a commit " +
		"make one sync, and a push during a running sync queues exactly one behind it. Another branch, another event, " +
		"a suspended source, a delivery id received before (a replay) or the commit the source holds already answers 200, ignored."
	o := huma.Operation{
		OperationID:   webhookOpID,
		Method:        http.MethodPost,
		Path:          Prefix + "/webhooks/{source}",
		Summary:       summary,
		Description:   summary + " Authenticated by the delivery's signature, not a bearer token; a bad or missing one answers 401 and its payload is not logged. The body is JSON, or GitHub's form with a payload field, under 1 MiB.",
		Security:      []map[string][]string{{}},
		DefaultStatus: http.StatusAccepted,
		MaxBodyBytes:  webhook.MaxBody,
		Metadata:      map[string]any{payloadKey: true},
		Errors: []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusRequestEntityTooLarge,
			http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
		Responses: map[string]*huma.Response{"200": {
			Description: "Ignored: nothing to sync.",
			Content:     map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Ref: "#/components/schemas/WebhookAnswer"}}},
		}},
	}
	register(api, d, o, func(ctx context.Context, in *webhookInput) (*webhookOutput, error) {
		res, err := d.GitOps.ReceiveWebhook(ctx, in.Source, in.delivery())
		if err != nil {
			result := string(errs.CodeOf(err))
			if result == "" {
				result = "error"
			}
			metrics.WebhookDeliveries.WithLabelValues(result).Inc()
			return nil, err
		}
		metrics.WebhookDeliveries.WithLabelValues(res.Outcome).Inc()
		out := &webhookOutput{Status: http.StatusAccepted, Body: WebhookAnswer{
			Outcome: res.Outcome, Reason: res.Reason, Host: string(res.Host), Event: res.Event, Delivery: res.Delivery, Commit: res.Commit,
		}}
		if res.Run == nil {
			out.Status = http.StatusOK
			return out, nil
		}
		out.Body.JournalID = &res.Run.ID
		out.Location = Prefix + "/journal/" + res.Run.ID.String()
		return out, nil
	})
	// The body as the hosts send it, instead of the raw bytes Huma declares
	// for RawBody.
	if path := api.OpenAPI().Paths[o.Path]; path != nil && path.Post != nil && path.Post.RequestBody != nil {
		path.Post.RequestBody.Description = "The push payload as the Git host sent it: JSON, or (GitHub) a form whose payload field is the JSON."
		path.Post.RequestBody.Content = map[string]*huma.MediaType{
			"application/json": {Schema: &huma.Schema{Type: huma.TypeObject, Description: "The host's push payload; sluice reads ref, after (GitLab: checkout_sha) and deleted.",
				AdditionalProperties: true}},
			"application/x-www-form-urlencoded": {Schema: &huma.Schema{Type: huma.TypeObject, Properties: map[string]*huma.Schema{
				"payload": {Type: huma.TypeString, Description: "The push payload's JSON.", MaxLength: ptr(webhook.MaxBody)},
			}}},
		}
	}
}
