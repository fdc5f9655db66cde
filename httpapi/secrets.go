package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/auth"
	"sluice/internal/errs"
	"sluice/internal/secrets"
)

// maxSecretBody bounds a set's body: the value's base64 and room for the
// rest. A larger value is refused (413) before it is decoded.
const maxSecretBody = int64(4*((secrets.MaxValue+2)/3)) + 4<<10

// Secret is a secret as the API shows it: its name, scope and version, who
// set it and when. No route ever answers a value.
type Secret struct {
	ID            uuid.UUID  `json:"id" format:"uuid"`
	Name          string     `json:"name" example:"db-password"`
	Source        string     `json:"source,omitempty" doc:"The source whose units see it, before a global secret of the same name; absent when global." example:"apps"`
	SourceID      *uuid.UUID `json:"sourceId,omitempty" format:"uuid"`
	SourceDeleted bool       `json:"sourceDeleted,omitempty" doc:"The source was deleted: no unit sees the secret, which can still be deleted with ?source= and the source's id."`
	Version       int32      `json:"version" doc:"1 when first set, one more at each rotation; never reused, even after a delete." example:"3"`
	SetBy         string     `json:"setBy" doc:"Who set this version."`
	SetAt         time.Time  `json:"setAt" doc:"When this version was set."`
	CreatedAt     time.Time  `json:"createdAt" doc:"When the name was first set in this scope."`
}

func secretOut(s *secrets.Secret) Secret {
	return Secret{ID: s.ID, Name: s.Name, Source: s.Source, SourceID: s.SourceID, SourceDeleted: s.SourceDeleted,
		Version: s.Version, SetBy: s.SetBy, SetAt: s.SetAt, CreatedAt: s.CreatedAt}
}

// SecretReceipt answers a set or a delete: the secret as it now is (as it
// was, for a delete) and the receipt that records it.
type SecretReceipt struct {
	Secret
	JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The receipt: set_secret or delete_secret, naming the secret, its scope and its version, never the value."`
}

// SecretInput sets a secret.
type SecretInput struct {
	// maxLength is the base64 of secrets.MaxValue bytes (TestSecretsAPI
	// checks it).
	Value  []byte `json:"value" maxLength:"1398104" writeOnly:"true" doc:"The value, 1 byte to 1 MiB (1,048,576 bytes) of anything (line breaks, NUL, invalid UTF-8), as standard base64. Stored sealed, byte for byte, and never shown back." example:"aHVudGVyMg=="`
	Source string `json:"source,omitempty" maxLength:"63" doc:"A source's name or id: only that source's units see the secret, before a global one of the same name. Omitted: a global secret." example:"apps"`
}

type setSecretInput struct {
	Name string `path:"name" maxLength:"63" doc:"1 to 63 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit." example:"db-password"`
	Body SecretInput
}

type secretReceiptOutput struct{ Body SecretReceipt }

type deleteSecretInput struct {
	Name   string `path:"name" maxLength:"63" doc:"The secret's name." example:"db-password"`
	Source string `query:"source" maxLength:"63" doc:"The source whose secret it is, by name or id (a deleted source by its id); omitted: the global one." example:"apps"`
}

type listSecretsOutput struct {
	Body struct {
		Secrets []Secret `json:"secrets" doc:"By name, the global one of a name first."`
	}
}

func registerSecrets(api huma.API, d Deps) {
	unavailable := func() error {
		return errs.Errorf(errs.Unavailable, "This server keeps no secrets.")
	}
	register(api, d, op("list-secrets", http.MethodGet, "/secrets",
		"List the secrets: name, scope, version, who set it and when. Never a value.", auth.RoleAdmin, http.StatusServiceUnavailable),
		func(ctx context.Context, _ *struct{}) (*listSecretsOutput, error) {
			if d.Secrets == nil {
				return nil, unavailable()
			}
			ss, err := d.Secrets.List(ctx)
			if err != nil {
				return nil, err
			}
			out := &listSecretsOutput{}
			out.Body.Secrets = make([]Secret, 0, len(ss))
			for _, s := range ss {
				out.Body.Secrets = append(out.Body.Secrets, secretOut(s))
			}
			return out, nil
		})

	o := op("set-secret", http.MethodPut, "/secrets/{name}",
		"Set a secret, global or for one source's units: its first version, or the next one (a rotation). "+
			"The value is write-only: sealed at rest, and never in an answer, a receipt or a log.",
		auth.RoleAdmin, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusServiceUnavailable)
	o.MaxBodyBytes = maxSecretBody
	register(api, d, o, func(ctx context.Context, in *setSecretInput) (*secretReceiptOutput, error) {
		if d.Secrets == nil {
			return nil, unavailable()
		}
		s, run, err := d.Secrets.Set(ctx, secrets.SetParams{Name: in.Name, Source: in.Body.Source, Value: in.Body.Value, By: requester(ctx)})
		if err != nil {
			return nil, err
		}
		return &secretReceiptOutput{Body: SecretReceipt{Secret: secretOut(s), JournalID: run.ID}}, nil
	})

	register(api, d, op("delete-secret", http.MethodDelete, "/secrets/{name}",
		"Delete a secret: its value goes, its receipts stay, and setting the name again continues its versions.",
		auth.RoleAdmin, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusServiceUnavailable),
		func(ctx context.Context, in *deleteSecretInput) (*secretReceiptOutput, error) {
			if d.Secrets == nil {
				return nil, unavailable()
			}
			s, run, err := d.Secrets.Delete(ctx, in.Name, in.Source, requester(ctx))
			if err != nil {
				return nil, err
			}
			return &secretReceiptOutput{Body: SecretReceipt{Secret: secretOut(s), JournalID: run.ID}}, nil
		})
}
