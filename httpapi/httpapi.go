// Package httpapi is sluice's HTTP surface: the Huma API under /api/v1, its
// OpenAPI spec, health endpoints and River UI, behind token auth.
//
// It only translates: request → domain call → response. Domain errors become
// problem+json in one place (mapError); an error it does not know becomes a
// generic 500 whose detail stays in the server log, never in the body.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/internal/artifactstore"
	"sluice/internal/auth"
	"sluice/internal/blueprint"
	"sluice/internal/errs"
	"sluice/internal/gitops"
	"sluice/internal/infra"
	"sluice/internal/journal"
	"sluice/internal/metrics"
	"sluice/internal/node"
	"sluice/internal/nodetask"
	"sluice/internal/notify"
	"sluice/internal/redact"
	"sluice/internal/secrets"
	"sluice/internal/services"
	"sluice/internal/source"
)

// Every array the server sends is one, never null: the response structs
// fill each slice (make(…, 0) where a domain value may be nil), so the spec
// says so. Huma's default declares every slice nullable, which makes every
// generated client check for null; it is set here, before newAPI, newHiddenAPI
// or Spec registers an operation, and once, since registrations run
// concurrently in tests.
func init() { huma.DefaultArrayNullable = false }

// Version is the API version in the spec.
const Version = "1.0.0"

// Prefix is where the API's operations live.
const Prefix = "/api/v1"

// Deps are what the handlers call. Nil fields are allowed only when building
// the spec (Spec), which serves nothing.
type Deps struct {
	Pool    *pgxpool.Pool
	Journal *journal.Journal
	GitOps  *gitops.Service
	// Sources keeps the sources' settings, policies and candidates and
	// answers their status (GitOps.Sources in serve).
	Sources *source.Service
	// Artifacts stores the content-addressed files services run.
	Artifacts *artifactstore.Store
	// Services deploys, rolls back and converges services.
	Services *services.Service
	// Infra plans, applies, destroys and drift-checks infrastructure.
	Infra  *infra.Service
	Logger *slog.Logger
	// Ready reports readiness for /readyz. Nil means always ready.
	Ready func(ctx context.Context) ReadyReport
	// RiverUI, when set, is mounted at /riverui/ behind auth.
	RiverUI http.Handler
	// TestActions registers the test-only hold action (not in the spec).
	TestActions bool
	// ShuttingDown, when closed, ends open event streams so that a graceful
	// shutdown does not wait for runs to finish.
	ShuttingDown <-chan struct{}
	// Nodes keeps the nodes and authenticates their agents; nil answers 503 on node routes.
	Nodes *node.Registry
	// Tasks dispatches host steps to node agents; nil answers 503 on task routes.
	Tasks *nodetask.Tasks
	// Blueprints keeps Blueprint placements; nil answers 503 on their routes.
	Blueprints *blueprint.Service
	// Notify keeps notification targets and deliveries; nil answers 503 on
	// their routes.
	Notify *notify.Service
	// Secrets keeps the secrets; nil answers 503 on their routes.
	Secrets *secrets.Service
	// Metrics, when set, is served at GET /metrics, behind a viewer token
	// unless MetricsPublic (SLUICE_METRICS_PUBLIC), and times every request.
	Metrics       *metrics.Endpoint
	MetricsPublic bool

	authn *auth.Authenticator // made by New: lookups shared by concurrent requests
}

// New returns the whole HTTP handler.
func New(d Deps) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Pool != nil {
		d.authn = auth.NewAuthenticator(d.Pool)
	}
	mux := http.NewServeMux()
	api := newAPI(mux, d)
	registerJournal(api, d)
	registerSyncPaths(api, d)
	registerTokens(api, d)
	registerGitOps(api, d)
	registerSources(api, d)
	registerArtifacts(api, d)
	registerServices(api, d)
	registerServiceStatus(api, d)
	registerInfra(api, d)
	registerNodes(api, d)
	registerNodeTasks(api, d)
	registerBlueprints(api, d)
	registerNotifications(api, d)
	registerSecrets(api, d)
	registerApplications(api, d)
	finishSpec(api.OpenAPI())
	serveSpec(mux, api)
	serveDocs(mux)
	if d.TestActions {
		registerTestActions(newHiddenAPI(mux, d), d)
	}
	registerHealth(mux, d)
	if d.Metrics != nil {
		mux.Handle("GET /metrics", metricsAuth(d, d.Metrics, d.MetricsPublic))
	}
	if d.RiverUI != nil {
		ui := riverUIAuth(d, d.RiverUI)
		mux.Handle("/riverui/", ui)
		mux.Handle("/riverui", ui)
	}
	h := logRequests(d.Logger, withConsole(mux))
	if d.Metrics != nil {
		h = observeRequests(d.Metrics, mux, operationRoutes(api), h)
	}
	return h
}

// Spec returns the OpenAPI document the server serves, without a database:
// `sluice openapi` prints it and `make generate` builds the client from it.
func Spec() *huma.OpenAPI {
	mux := http.NewServeMux()
	api := newAPI(mux, Deps{Logger: slog.New(slog.DiscardHandler)})
	registerJournal(api, Deps{})
	registerSyncPaths(api, Deps{})
	registerTokens(api, Deps{})
	registerGitOps(api, Deps{})
	registerSources(api, Deps{})
	registerArtifacts(api, Deps{})
	registerServices(api, Deps{})
	registerServiceStatus(api, Deps{})
	registerInfra(api, Deps{})
	registerNodes(api, Deps{})
	registerNodeTasks(api, Deps{})
	registerBlueprints(api, Deps{})
	registerNotifications(api, Deps{})
	registerSecrets(api, Deps{})
	registerApplications(api, Deps{})
	finishSpec(api.OpenAPI())
	return api.OpenAPI()
}

// newHiddenAPI returns an API on the same mux whose operations appear in no
// served spec: its schemas live in a registry of their own.
func newHiddenAPI(mux *http.ServeMux, d Deps) huma.API {
	config := huma.DefaultConfig("sluice test actions", Version)
	config.CreateHooks = nil
	config.SchemasPath = ""
	config.DocsPath = ""
	config.OpenAPIPath = ""
	config.Transformers = []huma.Transformer{quietErrors(config.Components.Schemas)}
	api := humago.New(mux, config)
	api.UseMiddleware(liftableDeadline, authMiddleware(api, d), boundInput(api))
	return api
}

func newAPI(mux *http.ServeMux, d Deps) huma.API {
	config := huma.DefaultConfig("sluice", Version)
	config.Info.Description = "sluice is a pull-based GitOps control plane. Every action is a journal run " +
		"(a receipt) worked by a River job. Authenticate with `Authorization: Bearer <token>`.\n\n" + boundsRule
	// No $schema fields, Link headers or /schemas routes: the spec is the contract.
	config.CreateHooks = nil
	config.SchemasPath = ""
	// Huma's docs page loads its JavaScript from a CDN, so it is blank
	// offline: serveDocs serves a reference that loads nothing from outside.
	config.DocsPath = ""
	config.Transformers = []huma.Transformer{quietErrors(config.Components.Schemas)}
	// Served by serveSpec instead, with a 3.0 document 3.0 validators accept.
	config.OpenAPIPath = ""
	config.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "An API token from `sluice token create`."},
	}
	api := humago.New(mux, config)
	api.UseMiddleware(liftableDeadline, authMiddleware(api, d), boundInput(api), streamBody)
	return api
}

type readDeadlineKey struct{}

// liftableDeadline hands the handler the connection's read deadline, which
// register lifts once Huma has read the body. Huma sets the operation's
// BodyReadTimeout (5 s) on the connection before it reads a body and leaves
// it there; net/http's background read, waiting on the same connection for
// the client to go away, then fails at that deadline and cancels the
// request's context. Any request with a body that took longer than 5 s (an
// approval behind 200 others, a sync behind a slow fetch) was cancelled
// half-way and answered 503.
func liftableDeadline(ctx huma.Context, next func(huma.Context)) {
	next(huma.WithValue(ctx, readDeadlineKey{}, ctx.SetReadDeadline))
}

// liftReadDeadline removes the body's read deadline from ctx's connection:
// the body has been read, and the request now lasts as long as its work.
func liftReadDeadline(ctx context.Context) {
	if set, ok := ctx.Value(readDeadlineKey{}).(func(time.Time) error); ok {
		_ = set(time.Time{})
	}
}

// roleKey is the operation metadata key that names the role an operation needs.
const roleKey = "sluice-role"

type tokenKey struct{}

// TokenFrom returns the authenticated token of a request's context.
func TokenFrom(ctx context.Context) *auth.Token {
	tok, _ := ctx.Value(tokenKey{}).(*auth.Token)
	return tok
}

// requester is the name recorded as who asked.
func requester(ctx context.Context) string {
	if tok := TokenFrom(ctx); tok != nil {
		return tok.Name
	}
	return "anonymous"
}

// op returns an operation that needs role, with its security requirement and
// its error statuses documented.
func op(id, method, path, summary string, role auth.Role, errStatuses ...int) huma.Operation {
	return huma.Operation{
		OperationID: id,
		Method:      method,
		Path:        Prefix + path,
		Summary:     summary,
		Description: summary + " Needs the " + string(role) + " role.",
		Security:    []map[string][]string{{"bearer": {}}},
		Metadata:    map[string]any{roleKey: role},
		// Any operation answers 503 when the database does not answer in
		// time, or the request is cancelled.
		Errors: append([]int{http.StatusUnauthorized, http.StatusForbidden, http.StatusServiceUnavailable}, errStatuses...),
	}
}

func authMiddleware(api huma.API, d Deps) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		need, ok := ctx.Operation().Metadata[roleKey].(auth.Role)
		if !ok {
			next(ctx)
			return
		}
		secret := bearer(ctx.Header("Authorization"))
		if isNodeRequest(need, secret) {
			nodeAuth(api, d, ctx, next, need, secret)
			return
		}
		tok, err := authenticate(ctx.Context(), d, secret)
		if err != nil {
			if errs.Is(err, errs.Unauthorized) {
				ctx.SetHeader("WWW-Authenticate", `Bearer realm="sluice"`)
			}
			writeErr(api, ctx, d.Logger, err)
			return
		}
		if !auth.Role(tok.Role).Allows(need) {
			writeErr(api, ctx, d.Logger, errs.Errorf(errs.Forbidden,
				"Token %q has the %s role; this needs %s.", tok.Name, tok.Role, need))
			return
		}
		next(huma.WithValue(ctx, tokenKey{}, tok))
	}
}

func authenticate(ctx context.Context, d Deps, secret string) (*auth.Token, error) {
	if d.Pool == nil {
		return nil, errs.Errorf(errs.Unavailable, "The server has no database.")
	}
	return d.authn.Authenticate(ctx, secret)
}

func bearer(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

func writeErr(api huma.API, ctx huma.Context, logger *slog.Logger, err error) {
	se := mapError(ctx.Context(), logger, err)
	_ = huma.WriteErr(api, ctx, se.GetStatus(), se.Error())
}

// statusOf maps the error vocabulary to HTTP.
var statusOf = map[errs.Code]int{
	errs.Invalid:      http.StatusUnprocessableEntity,
	errs.NotFound:     http.StatusNotFound,
	errs.Conflict:     http.StatusConflict,
	errs.Unauthorized: http.StatusUnauthorized,
	errs.Forbidden:    http.StatusForbidden,
	errs.Unavailable:  http.StatusServiceUnavailable,
}

// mapError is the one place domain errors become HTTP errors.
func mapError(ctx context.Context, logger *slog.Logger, err error) huma.StatusError {
	var se huma.StatusError
	if errors.As(err, &se) {
		return se
	}
	var e *errs.Error
	if errors.As(err, &e) {
		if status, ok := statusOf[e.Code]; ok {
			return huma.NewError(status, redact.String(e.Message))
		}
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return huma.NewError(http.StatusServiceUnavailable, "The request was cancelled.")
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// A bound of the server's own (the database's, most often) ran
		// out under load: worth a retry, unlike a fault.
		logger.ErrorContext(ctx, "timed out", "err", redact.Error(err))
		return huma.NewError(http.StatusServiceUnavailable, "A step of this request ran out of time; the server log has which. Try again in a moment.")
	}
	logger.ErrorContext(ctx, "internal error", "err", redact.Error(err))
	return huma.NewError(http.StatusInternalServerError, "Internal error; the server log has the details.")
}

// register adds an operation whose handler's errors go through mapError. An
// operation with a JSON body declares what Huma answers for a bad one.
func register[I, O any](api huma.API, d Deps, o huma.Operation, h func(context.Context, *I) (*O, error)) {
	if hasBody[I]() {
		o.Errors = append(slices.Clone(o.Errors), bodyStatuses...)
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	huma.Register(api, o, func(ctx context.Context, in *I) (*O, error) {
		liftReadDeadline(ctx)
		out, err := h(ctx, in)
		if err != nil {
			return nil, mapError(ctx, logger, err)
		}
		return out, nil
	})
}

func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	logger = logger.With("component", "http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			// A panic (a bug, here or in a library) answers 500 as any
			// internal error does, rather than drop the connection; the
			// stack goes to the log, never to the client.
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			logger.ErrorContext(r.Context(), "internal error: a handler panicked", "method", r.Method, "path", r.URL.Path,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !rec.wrote {
				rec.Header().Set("Content-Type", "application/problem+json")
				rec.WriteHeader(http.StatusInternalServerError)
				_, _ = rec.Write([]byte(`{"title":"Internal Server Error","status":500,"detail":"Internal error; the server log has the details."}`))
			}
		}()
		next.ServeHTTP(rec, r)
		level := slog.LevelDebug
		if rec.status >= 500 {
			level = slog.LevelWarn
		}
		logger.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "status", rec.status)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool // the header is sent
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status, s.wrote = code, true
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer (flush, deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes flushes through for streams.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
