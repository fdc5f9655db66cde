package main

import (
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sluice/internal/gitops"
	"sluice/internal/node"
	"sluice/internal/redact"
	"sluice/internal/secretbox"
	"sluice/internal/webhook"
)

// ServeConfig is the configuration of `sluice serve` and `sluice migrate`,
// read from the environment.
type ServeConfig struct {
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

	// GitOps seeds the stored GitOps settings on first start:
	// SLUICE_GITOPS_REPO_URL, SLUICE_GITOPS_BRANCH (default main),
	// SLUICE_GITOPS_PATH, SLUICE_GITOPS_SYNC_INTERVAL_SEC (default 600 when a
	// URL is set; 0 = manual only) and SLUICE_GITOPS_TOKEN. Its
	// WebhookSecret, SLUICE_GITOPS_WEBHOOK_SECRET, is put on the default
	// source at every start (nil when unset).
	GitOps gitops.SettingsInput
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
	// NodeSilence is SLUICE_NODE_UNREACHABLE_SEC, default 30: how long a node
	// may be silent before it reads Unreachable.
	NodeSilence time.Duration
}

// localNodeName is the host name as a node name: lower case, '-' for what a
// DNS label cannot hold, at most 63 characters.
func localNodeName() string {
	host, _ := os.Hostname()
	b := []byte(strings.ToLower(host))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	name := strings.Trim(string(b[:min(len(b), 63)]), "-")
	return cmp.Or(name, "local")
}

func loadServeConfig(getenv func(string) string) (*ServeConfig, error) {
	c := &ServeConfig{
		DatabaseURL:    getenv("SLUICE_DATABASE_URL"),
		DataDir:        cmp.Or(getenv("SLUICE_DATA_DIR"), ".sluice"),
		PostgresBinDir: getenv("SLUICE_POSTGRES_BIN_DIR"),
		Listen:         cmp.Or(getenv("SLUICE_LISTEN"), "127.0.0.1:8080"),
		LogFormat:      cmp.Or(getenv("SLUICE_LOG_FORMAT"), "text"),
		BootstrapToken: getenv("SLUICE_BOOTSTRAP_TOKEN"),
		TestActions:    getenv("SLUICE_ENABLE_TEST_ACTIONS") == "1",
	}
	var err error
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		return nil, fmt.Errorf("SLUICE_DATA_DIR: %w", err)
	}
	if err := c.LogLevel.UnmarshalText([]byte(cmp.Or(getenv("SLUICE_LOG_LEVEL"), "info"))); err != nil {
		return nil, fmt.Errorf("SLUICE_LOG_LEVEL must be debug, info, warn or error")
	}
	secs, err := intEnv(getenv, "SLUICE_SHUTDOWN_TIMEOUT_SEC", 30)
	if err != nil {
		return nil, err
	}
	c.ShutdownTimeout = time.Duration(secs) * time.Second
	if v := getenv("SLUICE_METRICS_PUBLIC"); v != "" {
		if c.MetricsPublic, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("SLUICE_METRICS_PUBLIC must be true or false, not %q", v)
		}
	}
	if c.MaxWorkers, err = intEnv(getenv, "SLUICE_MAX_WORKERS", 20); err != nil {
		return nil, err
	}
	c.PublicURL = cmp.Or(getenv("SLUICE_PUBLIC_URL"), "http://"+c.Listen)
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("SLUICE_PUBLIC_URL must be an http or https URL without credentials, such as https://sluice.example.com")
	}
	window, err := intEnv(getenv, "SLUICE_NOTIFY_DEDUP_WINDOW_SEC", 21600)
	if err != nil {
		return nil, err
	}
	c.NotifyDedupWindow = time.Duration(window) * time.Second
	c.GitOps = gitops.SettingsInput{
		RepoURL: getenv("SLUICE_GITOPS_REPO_URL"),
		Branch:  cmp.Or(getenv("SLUICE_GITOPS_BRANCH"), "main"),
		Path:    getenv("SLUICE_GITOPS_PATH"),
		Token:   getenv("SLUICE_GITOPS_TOKEN"),
	}
	if v := getenv("SLUICE_GITOPS_WEBHOOK_SECRET"); v != "" {
		c.GitOps.WebhookSecret = &v
	}
	c.GitOpsIntervalSet = getenv("SLUICE_GITOPS_SYNC_INTERVAL_SEC") != ""
	if c.GitOps.SyncIntervalSec, err = intEnv(getenv, "SLUICE_GITOPS_SYNC_INTERVAL_SEC", gitops.DefaultInterval); err != nil {
		return nil, err
	}
	c.TerraformBin = getenv("SLUICE_TERRAFORM_BIN")
	c.ModuleBankURL = getenv("SLUICE_MODULE_BANK_URL")
	c.ModuleBankRef = cmp.Or(getenv("SLUICE_MODULE_BANK_REF"), "main")
	if c.TerraformConcurrency, err = intEnv(getenv, "SLUICE_TERRAFORM_CONCURRENCY", 4); err != nil {
		return nil, err
	}
	if c.DriftIntervalSec, err = intEnv(getenv, "SLUICE_DRIFT_INTERVAL_SEC", 3600); err != nil {
		return nil, err
	}
	c.NodeName = cmp.Or(getenv("SLUICE_NODE_NAME"), localNodeName())
	c.DefaultNode = getenv("SLUICE_DEFAULT_NODE")
	silence, err := intEnv(getenv, "SLUICE_NODE_UNREACHABLE_SEC", 30)
	if err != nil {
		return nil, err
	}
	c.NodeSilence = time.Duration(silence) * time.Second
	if c.ServiceDriftIntervalSec, err = intEnv(getenv, "SLUICE_SERVICE_DRIFT_INTERVAL_SEC", 300); err != nil {
		return nil, err
	}
	c.ConfigRoot = cmp.Or(getenv("SLUICE_CONFIG_ROOT"), filepath.Join(c.DataDir, "config"))
	if c.ConfigRoot, err = filepath.Abs(c.ConfigRoot); err != nil {
		return nil, fmt.Errorf("SLUICE_CONFIG_ROOT: %w", err)
	}
	if c.SecretKey, err = keyEnv(getenv, "SLUICE_SECRET_KEY"); err != nil {
		return nil, err
	}
	if c.SecretKeyPrevious, err = keyEnv(getenv, "SLUICE_SECRET_KEY_PREVIOUS"); err != nil {
		return nil, err
	}
	return c, c.validate()
}

// keyEnv parses a key variable; nil when it is unset. Its errors name the
// variable, never its value.
func keyEnv(getenv func(string) string, name string) (*secretbox.Key, error) {
	s := getenv(name)
	if s == "" {
		return nil, nil
	}
	k, err := secretbox.ParseKey(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not a key: %w", name, err)
	}
	return &k, nil
}

// secretKeyFile is where the key lives when SLUICE_SECRET_KEY is unset.
func (c *ServeConfig) secretKeyFile() string { return filepath.Join(c.DataDir, "secret.key") }

// secretBox returns what seals Git credentials at rest: SLUICE_SECRET_KEY,
// else the key file in the data dir (created with a new key at first start),
// with SLUICE_SECRET_KEY_PREVIOUS to open what the key before sealed.
func (c *ServeConfig) secretBox() (*secretbox.Box, error) {
	opts := secretbox.Opts{Origin: "SLUICE_SECRET_KEY"}
	if c.SecretKey != nil {
		opts.Key = *c.SecretKey
	} else {
		k, created, err := secretbox.LoadKeyFile(c.secretKeyFile())
		if err != nil {
			return nil, fmt.Errorf("the key that seals Git credentials: %w; or set SLUICE_SECRET_KEY", err)
		}
		opts.Key, opts.Origin = k, "the key file "+c.secretKeyFile()
		if created {
			opts.Origin += ", created at this start"
		}
	}
	if c.SecretKeyPrevious != nil {
		opts.Previous = []secretbox.Key{*c.SecretKeyPrevious}
	}
	return secretbox.New(opts)
}

func (c *ServeConfig) validate() error {
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("SLUICE_LOG_FORMAT must be text or json, not %q", c.LogFormat)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("SLUICE_LISTEN must be host:port, such as 127.0.0.1:8080: %w", err)
	}
	if c.DatabaseURL != "" {
		if _, err := url.Parse(c.DatabaseURL); err != nil && !strings.Contains(c.DatabaseURL, "=") {
			return fmt.Errorf("SLUICE_DATABASE_URL is not a PostgreSQL URL or key=value string")
		}
	}
	if c.BootstrapToken != "" && len(c.BootstrapToken) < 16 {
		return fmt.Errorf("SLUICE_BOOTSTRAP_TOKEN must have at least 16 characters")
	}
	if c.MaxWorkers < 1 {
		return fmt.Errorf("SLUICE_MAX_WORKERS must be at least 1")
	}
	if c.NodeName != "-" {
		if err := node.ValidateName(c.NodeName); err != nil {
			return fmt.Errorf("SLUICE_NODE_NAME: %w (or - for a serve that is no node)", err)
		}
	}
	if c.NodeSilence < time.Second {
		return fmt.Errorf("SLUICE_NODE_UNREACHABLE_SEC must be at least 1")
	}
	if c.TerraformConcurrency < 0 {
		return fmt.Errorf("SLUICE_TERRAFORM_CONCURRENCY must be 0 (no Terraform in this process) or more")
	}
	if c.DriftIntervalSec < 0 {
		return fmt.Errorf("SLUICE_DRIFT_INTERVAL_SEC must be 0 (off) or a number of seconds")
	}
	if c.ServiceDriftIntervalSec < 0 {
		return fmt.Errorf("SLUICE_SERVICE_DRIFT_INTERVAL_SEC must be 0 (off) or a number of seconds")
	}
	if w := c.GitOps.WebhookSecret; w != nil && (len(*w) < webhook.MinSecret || len(*w) > webhook.MaxSecret) {
		return fmt.Errorf("SLUICE_GITOPS_WEBHOOK_SECRET needs %d to %d bytes, not %d; `openssl rand -hex 32` makes one", webhook.MinSecret, webhook.MaxSecret, len(*w))
	}
	if u, err := url.Parse(c.GitOps.RepoURL); err == nil && u.User != nil && c.GitOps.Token != "" {
		if pw, _ := u.User.Password(); pw != "" {
			return fmt.Errorf("SLUICE_GITOPS_REPO_URL carries a password and SLUICE_GITOPS_TOKEN is set too, so one of them would be ignored; drop the password from the URL, or unset SLUICE_GITOPS_TOKEN")
		}
	}
	return nil
}

// secrets are the configured values the redactor must remove everywhere: a
// URL's password, never its user name, unless the user part stands alone in
// an https URL (https://TOKEN@host) with no token beside it.
func (c *ServeConfig) secrets() []string {
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

func intEnv(getenv func(string) string, name string, def int) (int, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a whole number of 0 or more, not %q", name, s)
	}
	return n, nil
}

// newLogger returns the process's logger: every line passes the redactor.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(redact.NewHandler(h, redact.Default))
}
