package gitops

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
	"sluice/internal/imageref"
	"sluice/internal/journal"
	"sluice/internal/redact"
	"sluice/internal/secrets"
	"sluice/internal/source"
)

// Service is the GitOps machinery: syncs, accepts and their schedule, and
// the repositories' working trees.
type Service struct {
	Pool    *pgxpool.Pool
	Journal *journal.Journal
	// Sources keeps the sources' settings, credentials, policies and
	// candidates: the words a sync reads. New makes it on the same pool.
	Sources *source.Service
	// ConfigRoot is the working tree the default source's repository is
	// mirrored into.
	ConfigRoot string
	// SourcesDir holds the working trees of the other sources, one
	// directory per source id (see WorkTree). Default: "sources" beside
	// ConfigRoot.
	SourcesDir string
	Redactor   *redact.Redactor
	Logger     *slog.Logger
	// Secrets opens the age identity a sync decrypts the SOPS files its
	// units name with, to check them. Nil: such a unit is invalid.
	Secrets *secrets.Service
	// AfterAcceptFunc, when set, is called by FollowUp with the units that a
	// sync or an accept of an auto-deploy source created or updated, after
	// its run committed: serve sets it to converge the services and plan
	// (or apply) the infrastructure. It lives here as a func so that gitops
	// need not import services or infra, which import gitops. Nil: nothing
	// is deployed.
	AfterAcceptFunc func(ctx context.Context, accepted []*db.Unit) error
	// Images reads a container service's image from its registry when a
	// sync accepts its content: a tag's digest, an index's images. Nil: a
	// Resolver with the default transport.
	Images *imageref.Resolver
	// RepackAt is how many packs a working tree's object store holds when
	// FollowUp repacks it after a sync. Default gitsync.RepackAt.
	RepackAt int

	// flights are the SyncNow calls in flight, by source.
	flights syncFlights
}

// New returns a Service, and its Sources on the same pool; Sources.Secrets
// is left for the caller to set.
func New(pool *pgxpool.Pool, j *journal.Journal, configRoot string, red *redact.Redactor, logger *slog.Logger) *Service {
	if red == nil {
		red = redact.Default
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{
		Pool: pool, Journal: j, Sources: source.New(pool, j, red, logger),
		ConfigRoot: configRoot, SourcesDir: filepath.Join(filepath.Dir(configRoot), "sources"),
		Redactor: red, Logger: logger.With("component", "gitops"),
	}
}
