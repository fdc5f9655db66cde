package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sluice/internal/agent"
	"sluice/internal/controlplane"
	"sluice/internal/nodeproto"
	"sluice/internal/notify"
	"sluice/internal/redact"
	"sluice/internal/retention"
	"sluice/internal/secretbox"
	"sluice/internal/source"
	"sluice/internal/webhook"
)

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

func loadServeConfig(getenv func(string) string) (*controlplane.Config, error) {
	c := &controlplane.Config{
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
	if c.NotifyAllowNets, err = notify.ParseAllowNets(getenv(notify.AllowNetsVar)); err != nil {
		return nil, fmt.Errorf("%s: %w; give comma-separated networks, such as 10.0.0.0/8,127.0.0.1/32", notify.AllowNetsVar, err)
	}
	c.GitOps = source.SettingsInput{
		RepoURL: getenv("SLUICE_GITOPS_REPO_URL"),
		Branch:  cmp.Or(getenv("SLUICE_GITOPS_BRANCH"), "main"),
		Path:    getenv("SLUICE_GITOPS_PATH"),
		Token:   getenv("SLUICE_GITOPS_TOKEN"),
	}
	if v := getenv("SLUICE_GITOPS_WEBHOOK_SECRET"); v != "" {
		c.GitOps.WebhookSecret = &v
	}
	c.GitOpsIntervalSet = getenv("SLUICE_GITOPS_SYNC_INTERVAL_SEC") != ""
	if c.GitOps.SyncIntervalSec, err = intEnv(getenv, "SLUICE_GITOPS_SYNC_INTERVAL_SEC", source.DefaultInterval); err != nil {
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
	c.Systemd = cmp.Or(getenv("SLUICE_SYSTEMD"), agent.SystemdAuto)
	c.ContainerHost = agent.ContainerHost(getenv)
	if c.ContainerVolumePrefixes, err = agent.ContainerVolumePrefixes(getenv); err != nil {
		return nil, err
	}
	silence, err := intEnv(getenv, "SLUICE_NODE_UNREACHABLE_SEC", 30)
	if err != nil {
		return nil, err
	}
	c.NodeSilence = time.Duration(silence) * time.Second
	if c.ServiceDriftIntervalSec, err = intEnv(getenv, "SLUICE_SERVICE_DRIFT_INTERVAL_SEC", 300); err != nil {
		return nil, err
	}
	c.TLSCert, c.TLSKey = getenv("SLUICE_TLS_CERT"), getenv("SLUICE_TLS_KEY")
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, fmt.Errorf("SLUICE_TLS_CERT and SLUICE_TLS_KEY go together: set both (a PEM certificate chain and its key) or neither")
	}
	if c.Retention.Keep, err = retention.ParseKeep(getenv("SLUICE_JOURNAL_RETENTION")); err != nil {
		return nil, fmt.Errorf("SLUICE_JOURNAL_RETENTION: %w", err)
	}
	if c.Retention.KeepLast, err = intEnv(getenv, "SLUICE_JOURNAL_KEEP_LAST", retention.DefaultKeepLast); err != nil {
		return nil, err
	}
	switch dir := getenv("SLUICE_JOURNAL_ARCHIVE_DIR"); dir {
	case "off":
	case "":
		c.Retention.ArchiveDir = filepath.Join(c.DataDir, "journal-archive")
	default:
		if c.Retention.ArchiveDir, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("SLUICE_JOURNAL_ARCHIVE_DIR: %w", err)
		}
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
	return c, validateServeConfig(c)
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

// validateServeConfig refuses a configuration that cannot run, naming the
// variable to change.
func validateServeConfig(c *controlplane.Config) error {
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
		if err := nodeproto.ValidateName(c.NodeName); err != nil {
			return fmt.Errorf("SLUICE_NODE_NAME: %w (or - for a serve that is no node)", err)
		}
	}
	if !slices.Contains(agent.SystemdModes, c.Systemd) {
		return fmt.Errorf("SLUICE_SYSTEMD must be one of %s, not %q", strings.Join(agent.SystemdModes, ", "), c.Systemd)
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
