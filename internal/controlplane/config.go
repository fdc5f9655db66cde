package controlplane

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"sluice/internal/retention"
	"sluice/internal/secretbox"
	"sluice/internal/source"
)

// Config is the configuration of `sluice serve`, `sluice worker` and
// `sluice migrate`. cmd/sluice reads it from the environment (each field
// names its variable) and checks it before anything starts.
type Config struct {
	// DatabaseURL is SLUICE_DATABASE_URL. Empty: start the embedded
	// PostgreSQL in DataDir/postgres.
	DatabaseURL string
	// PostgresBinDir is SLUICE_POSTGRES_BIN_DIR: where the embedded
	// PostgreSQL's binaries are. Default: pg_ctl on PATH, else the newest
	// /usr/lib/postgresql/*/bin.
	PostgresBinDir string
	// DataDir is SLUICE_DATA_DIR, default ./.sluice (made absolute).
	DataDir string
	// Listen is SLUICE_LISTEN, default 127.0.0.1:8080.
	Listen string
	// TLSCert and TLSKey are SLUICE_TLS_CERT and SLUICE_TLS_KEY, PEM files:
	// when set, serve speaks HTTPS only, and loads them again when they
	// change. Both or neither.
	TLSCert, TLSKey string
	// LogFormat is SLUICE_LOG_FORMAT: text (default) or json.
	LogFormat string
	// LogLevel is SLUICE_LOG_LEVEL: debug, info (default), warn or error.
	LogLevel slog.Level
	// BootstrapToken is SLUICE_BOOTSTRAP_TOKEN: when set, an admin token
	// with this value exists (named "bootstrap").
	BootstrapToken string
	// ShutdownTimeout is SLUICE_SHUTDOWN_TIMEOUT_SEC, default 30: how long
	// running jobs get to finish on SIGTERM before they are cancelled.
	ShutdownTimeout time.Duration
	// MaxWorkers is SLUICE_MAX_WORKERS, default 20: jobs worked at once.
	MaxWorkers int
	// TestActions is SLUICE_ENABLE_TEST_ACTIONS=1: registers test-only actions.
	TestActions bool
	// MetricsPublic is SLUICE_METRICS_PUBLIC (true or false, default
	// false): true serves /metrics without a token.
	MetricsPublic bool
	// PublicURL is SLUICE_PUBLIC_URL, how people reach this server: the
	// links in notifications. Default http:// and SLUICE_LISTEN.
	PublicURL string
	// NotifyDedupWindow is SLUICE_NOTIFY_DEDUP_WINDOW_SEC, default 21600 (6
	// hours): how long a notification covers the same one (target, event,
	// object, revision, error class) after it.
	NotifyDedupWindow time.Duration
	// NotifyAllowNets is SLUICE_NOTIFY_ALLOW_NETS, comma-separated CIDRs
	// (10.0.0.0/8,127.0.0.1/32): networks notification targets may reach
	// although they are loopback, private, link-local or metadata
	// addresses, which are refused by default. Default: none.
	NotifyAllowNets []netip.Prefix

	// GitOps seeds the stored GitOps settings on first start:
	// SLUICE_GITOPS_REPO_URL, SLUICE_GITOPS_BRANCH (default main),
	// SLUICE_GITOPS_PATH, SLUICE_GITOPS_SYNC_INTERVAL_SEC (default 600 when a
	// URL is set; 0 = manual only) and SLUICE_GITOPS_TOKEN. Its
	// WebhookSecret, SLUICE_GITOPS_WEBHOOK_SECRET, is put on the default
	// source at every start (nil when unset).
	GitOps source.SettingsInput
	// GitOpsIntervalSet is true when SLUICE_GITOPS_SYNC_INTERVAL_SEC is set.
	GitOpsIntervalSet bool
	// ConfigRoot is SLUICE_CONFIG_ROOT, the working tree the repository is
	// mirrored into; default DataDir/config.
	ConfigRoot string
	// SecretKey is SLUICE_SECRET_KEY: the key that seals Git credentials at
	// rest, 32 bytes as standard base64 or 64 hex digits. Nil: the key file
	// DataDir/secret.key, created at first start.
	SecretKey *secretbox.Key
	// SecretKeyPrevious is SLUICE_SECRET_KEY_PREVIOUS, in the same form: the
	// key being rotated away from. Credentials it sealed are re-sealed with
	// the current key at start. Nil when no rotation is under way.
	SecretKeyPrevious *secretbox.Key

	// TerraformBin is SLUICE_TERRAFORM_BIN; default terraform on PATH.
	TerraformBin string
	// TerraformConcurrency is SLUICE_TERRAFORM_CONCURRENCY, default 4: how
	// many units run Terraform at once in this process. 0: this process runs
	// no Terraform, and infrastructure operations wait for a process (a
	// worker) that does.
	TerraformConcurrency int
	// ModuleBankURL and ModuleBankRef are SLUICE_MODULE_BANK_URL and
	// SLUICE_MODULE_BANK_REF (default main): a repository that infrastructure
	// modules come from instead of the intent repository.
	ModuleBankURL, ModuleBankRef string
	// DriftIntervalSec is SLUICE_DRIFT_INTERVAL_SEC, default 3600: how often
	// every infrastructure unit is drift-checked; 0 turns the sweep off.
	DriftIntervalSec int
	// ServiceDriftIntervalSec is SLUICE_SERVICE_DRIFT_INTERVAL_SEC, default
	// 300: how often every applied service is drift-checked (drift mode
	// enforce repairs what two checks in a row see); 0 turns it off.
	ServiceDriftIntervalSec int
	// NodeName is SLUICE_NODE_NAME, default the host name made a DNS label:
	// serve's own node, whose host steps serve runs itself. "-": serve is no
	// node.
	NodeName string
	// DefaultNode is SLUICE_DEFAULT_NODE: where a service without spec.node
	// runs. Default serve's own node.
	DefaultNode string
	// Systemd is SLUICE_SYSTEMD, default auto: whether serve's own node runs
	// services under systemd too (auto: when systemd runs the host and
	// serve is root; off; system; user), as for an agent.
	Systemd string
	// ContainerHost is the container engine serve's own node drives (see
	// agent.ContainerHost); "" gives it no container runtime.
	ContainerHost string
	// ContainerVolumePrefixes is SLUICE_CONTAINER_VOLUME_PREFIXES: the
	// host directories under which serve's own node's containers may
	// bind-mount a path; none by default, which refuses every bind mount.
	ContainerVolumePrefixes []string
	// NodeSilence is SLUICE_NODE_UNREACHABLE_SEC, default 30: how long a node
	// may be silent before it reads Unreachable.
	NodeSilence time.Duration
	// Retention is the journal's retention policy: SLUICE_JOURNAL_RETENTION
	// (default 366d; off keeps every event), SLUICE_JOURNAL_KEEP_LAST
	// (default 10) and SLUICE_JOURNAL_ARCHIVE_DIR (default the data dir's
	// journal-archive; off drops months without writing them out).
	Retention retention.Policy
}

// SecretKeyFile is where the key lives when SLUICE_SECRET_KEY is unset.
func (c *Config) SecretKeyFile() string { return filepath.Join(c.DataDir, "secret.key") }

// SecretBox returns what seals Git credentials, webhook and notification
// secrets and the secret store's values at rest: SLUICE_SECRET_KEY, else the
// key file in the data dir (created with a new key at first start), with
// SLUICE_SECRET_KEY_PREVIOUS to open what the key before sealed.
func (c *Config) SecretBox() (*secretbox.Box, error) {
	opts := secretbox.Opts{Origin: "SLUICE_SECRET_KEY"}
	if c.SecretKey != nil {
		opts.Key = *c.SecretKey
	} else {
		k, created, err := secretbox.LoadKeyFile(c.SecretKeyFile())
		if err != nil {
			return nil, fmt.Errorf("the key that seals Git credentials: %w; or set SLUICE_SECRET_KEY", err)
		}
		opts.Key, opts.Origin = k, "the key file "+c.SecretKeyFile()
		if created {
			opts.Origin += ", created at this start"
		}
	}
	if c.SecretKeyPrevious != nil {
		opts.Previous = []secretbox.Key{*c.SecretKeyPrevious}
	}
	return secretbox.New(opts)
}

// Secrets are the configured values the redactor must remove everywhere: a
// URL's password, never its user name, unless the user part stands alone in
// an https URL (https://TOKEN@host) with no token beside it.
func (c *Config) Secrets() []string {
	out := []string{c.BootstrapToken, c.GitOps.Token}
	if c.GitOps.WebhookSecret != nil {
		out = append(out, *c.GitOps.WebhookSecret)
	}
	for _, repo := range []struct{ url, token string }{{c.GitOps.RepoURL, c.GitOps.Token}, {c.ModuleBankURL, ""}} {
		u, err := url.Parse(repo.url)
		if err != nil || u.User == nil {
			continue
		}
		if pw, _ := u.User.Password(); pw != "" {
			out = append(out, pw, u.User.String())
			if escaped, ok := strings.CutPrefix(u.User.String(), url.User(u.User.Username()).String()+":"); ok {
				out = append(out, escaped)
			}
		} else if repo.token == "" && (u.Scheme == "https" || u.Scheme == "http") {
			out = append(out, u.User.Username(), u.User.String())
		}
	}
	for _, k := range []*secretbox.Key{c.SecretKey, c.SecretKeyPrevious} {
		if k != nil {
			out = append(out, base64.StdEncoding.EncodeToString(k[:]), hex.EncodeToString(k[:]))
		}
	}
	if u, err := url.Parse(c.DatabaseURL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, url.QueryEscape(pw))
		}
	}
	return out
}
