package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"sluice/internal/auth"
	"sluice/internal/errs"
)

// Token describes an API token. Its secret is never shown again after
// creation.
type Token struct {
	ID         uuid.UUID  `json:"id" format:"uuid"`
	Name       string     `json:"name"`
	Role       string     `json:"role" enum:"viewer,operator,admin"`
	CreatedAt  time.Time  `json:"createdAt"`
	CreatedBy  string     `json:"createdBy"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty" doc:"Updated at most once a minute."`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

func tokenOut(t *auth.Token) Token {
	return Token{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt, CreatedBy: t.CreatedBy,
		LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt}
}

type createTokenInput struct {
	Body struct {
		Name string `json:"name" minLength:"1" maxLength:"100" doc:"A name people recognize; recorded on every run the token asks for." example:"ci-deployer"`
		Role string `json:"role" enum:"viewer,operator,admin" doc:"viewer reads; operator also acts and uses River UI; admin also changes settings and tokens."`
	}
}

type createTokenOutput struct {
	Body struct {
		Token
		Secret    string    `json:"secret" doc:"The token. It is shown once: store it now."`
		JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The receipt of the creation."`
	}
}

type listTokensOutput struct {
	Body struct {
		Tokens []Token `json:"tokens"`
	}
}

type sessionOutput struct {
	Body Token
}

type revokeTokenInput struct {
	Ref string `path:"ref" maxLength:"100" doc:"The token's name or id."`
}

type revokeTokenOutput struct {
	Body struct {
		Token
		JournalID uuid.UUID `json:"journalId" format:"uuid" doc:"The receipt of the revocation."`
	}
}

func registerTokens(api huma.API, d Deps) {
	o := op("create-token", http.MethodPost, "/tokens", "Create an API token and show its secret once.",
		auth.RoleAdmin, http.StatusConflict, http.StatusUnprocessableEntity)
	o.DefaultStatus = http.StatusCreated
	register(api, d, o, func(ctx context.Context, in *createTokenInput) (*createTokenOutput, error) {
		role, err := auth.ParseRole(in.Body.Role)
		if err != nil {
			return nil, err
		}
		secret, tok, run, err := auth.Issue(ctx, d.Pool, d.Journal, in.Body.Name, role, requester(ctx))
		if err != nil {
			return nil, err
		}
		out := &createTokenOutput{}
		out.Body.Token = tokenOut(tok)
		out.Body.Secret = secret
		out.Body.JournalID = run.ID
		return out, nil
	})

	register(api, d, op("list-tokens", http.MethodGet, "/tokens", "List API tokens (never their secrets).", auth.RoleAdmin),
		func(ctx context.Context, _ *struct{}) (*listTokensOutput, error) {
			toks, err := auth.List(ctx, d.Pool)
			if err != nil {
				return nil, err
			}
			out := &listTokensOutput{}
			out.Body.Tokens = make([]Token, 0, len(toks))
			for _, t := range toks {
				out.Body.Tokens = append(out.Body.Tokens, tokenOut(t))
			}
			return out, nil
		})

	register(api, d, op("get-session", http.MethodGet, "/session",
		"Show the token this request carries: its name and role, never its secret. A console reads it to offer only the actions the role may take.",
		auth.RoleViewer),
		func(ctx context.Context, _ *struct{}) (*sessionOutput, error) {
			tok := TokenFrom(ctx)
			if tok == nil {
				return nil, errs.Errorf(errs.Unauthorized, "Send an API token as \"Authorization: Bearer <token>\".")
			}
			return &sessionOutput{Body: tokenOut(tok)}, nil
		})

	register(api, d, op("revoke-token", http.MethodDelete, "/tokens/{ref}", "Revoke an API token.", auth.RoleAdmin, http.StatusNotFound),
		func(ctx context.Context, in *revokeTokenInput) (*revokeTokenOutput, error) {
			tok, run, err := auth.Revoke(ctx, d.Pool, d.Journal, in.Ref, requester(ctx))
			if err != nil {
				return nil, err
			}
			out := &revokeTokenOutput{}
			out.Body.Token, out.Body.JournalID = tokenOut(tok), run.ID
			return out, nil
		})
}
