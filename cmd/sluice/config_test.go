package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
	"sluice/internal/redact"
	"sluice/internal/retention"
	"sluice/internal/secretbox"
)

// envOf is a getenv over kv pairs.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

func TestServeConfigSecrets(t *testing.T) {
	t.Parallel()

	t.Run("PasswordsAndTokensAreSecretsButUserNamesAreNot", func(t *testing.T) {
		t.Parallel()
		cfg, err := loadServeConfig(envOf(
			"SLUICE_GITOPS_REPO_URL=https://main:pw-Url-6f1a@git.example.com/intent.git",
			"SLUICE_MODULE_BANK_URL=https://user:pw-B%40nk-90c2@git.example.com/modules.git",
		))
		require.NoError(t, err)
		r := &redact.Redactor{}
		r.Add(cfg.Secrets()...)
		require.Equal(t, "fetching (branch main); check the token, or the user and password *** *** ***",
			r.String("fetching (branch main); check the token, or the user and password pw-Url-6f1a pw-B@nk-90c2 pw-B%40nk-90c2"))
	})

	t.Run("TokenInTheUserPartIsASecret", func(t *testing.T) {
		t.Parallel()
		cfg, err := loadServeConfig(envOf("SLUICE_MODULE_BANK_URL=https://ghp_tokenAsUser01@git.example.com/modules.git"))
		require.NoError(t, err)
		require.Contains(t, cfg.Secrets(), "ghp_tokenAsUser01")

		// With a token beside it, the user part is the user name it goes with.
		cfg, err = loadServeConfig(envOf("SLUICE_GITOPS_REPO_URL=https://deployer@git.example.com/intent.git", "SLUICE_GITOPS_TOKEN=tok-Env-77c1"))
		require.NoError(t, err)
		require.Contains(t, cfg.Secrets(), "tok-Env-77c1")
		require.NotContains(t, cfg.Secrets(), "deployer")
	})

	t.Run("TokenGivenTwoWaysIsAStartError", func(t *testing.T) {
		t.Parallel()
		_, err := loadServeConfig(envOf("SLUICE_GITOPS_REPO_URL=https://deployer:pw-Twice-1a@git.example.com/intent.git", "SLUICE_GITOPS_TOKEN=tok-Twice-2b"))
		require.EqualError(t, err, "SLUICE_GITOPS_REPO_URL carries a password and SLUICE_GITOPS_TOKEN is set too, so one of them would be ignored; drop the password from the URL, or unset SLUICE_GITOPS_TOKEN")
	})
}

func TestServeConfigSecretKey(t *testing.T) {
	t.Parallel()

	t.Run("KeyFileIsCreatedOnceInTheDataDir", func(t *testing.T) {
		t.Parallel()
		dataDir := t.TempDir()
		cfg, err := loadServeConfig(envOf("SLUICE_DATA_DIR=" + dataDir))
		require.NoError(t, err)
		box, err := cfg.SecretBox()
		require.NoError(t, err)
		path := filepath.Join(dataDir, "secret.key")
		require.Equal(t, "the key file "+path+", created at this start", box.Origin())
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

		again, err := cfg.SecretBox()
		require.NoError(t, err)
		require.Equal(t, "the key file "+path, again.Origin())
		require.Equal(t, box.KeyID(), again.KeyID())
	})

	t.Run("EnvKeyWinsAndNoFileIsMade", func(t *testing.T) {
		t.Parallel()
		dataDir := t.TempDir()
		key, err := secretbox.NewKey()
		require.NoError(t, err)
		for _, form := range []string{base64.StdEncoding.EncodeToString(key[:]), hex.EncodeToString(key[:])} {
			cfg, err := loadServeConfig(envOf("SLUICE_DATA_DIR="+dataDir, "SLUICE_SECRET_KEY="+form))
			require.NoError(t, err)
			box, err := cfg.SecretBox()
			require.NoError(t, err)
			require.Equal(t, "SLUICE_SECRET_KEY", box.Origin())
			require.Contains(t, cfg.Secrets(), form, "the key is masked wherever it would show")
		}
		require.NoFileExists(t, filepath.Join(dataDir, "secret.key"))
	})

	t.Run("BadKeySaysWhatItMustBeWithoutShowingIt", func(t *testing.T) {
		t.Parallel()
		const bad = "c2hvcnQta2V5LXZhbHVl" // 15 bytes
		for _, name := range []string{"SLUICE_SECRET_KEY", "SLUICE_SECRET_KEY_PREVIOUS"} {
			_, err := loadServeConfig(envOf(name + "=" + bad))
			require.ErrorContains(t, err, name+" is not a key: it must be 32 bytes written as standard base64")
			require.ErrorContains(t, err, "openssl rand -base64 32")
			require.NotContains(t, err.Error(), bad)
		}
	})
}

// TestServeSealsCredentialsWithTheKey runs serve against one database with
// the key file, a rotation to SLUICE_SECRET_KEY, and the old key again.
func TestServeSealsCredentialsWithTheKey(t *testing.T) {
	t.Parallel()

	const password = "pw-E2e-Sealed-3f9a71"
	repo := gittest.New(t)
	repo.Commit(t, "one", map[string]string{"apps/web.json": `{"kind":"Config","metadata":{"name":"web"},"spec":{}}`})
	dbURL := dbtest.NewDB(t)
	dataDir := t.TempDir()
	keyFile := filepath.Join(dataDir, "secret.key")
	env := []string{
		"SLUICE_DATABASE_URL=" + dbURL,
		"SLUICE_DATA_DIR=" + dataDir,
		// The user is main, as the branch: masking it would garble events.
		"SLUICE_GITOPS_REPO_URL=file://main:" + password + "@localhost" + repo.Bare,
		"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0",
		"SLUICE_LOG_LEVEL=debug",
	}
	requireNoSecretIn := func(t *testing.T, text string, secrets ...string) {
		t.Helper()
		for _, s := range secrets {
			require.NotContains(t, text, s)
		}
	}

	// First start: the key file is made, the credentials are sealed, and the
	// sync authenticates with them.
	p, _ := startServe(t, env...)
	fi, err := os.Stat(keyFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	oldKey, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	require.Len(t, oldKey, secretbox.KeyLen)
	id := p.accepted("/api/v1/gitops/sync", nil)
	p.waitRun(id, "succeeded")
	p.term()

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT message FROM journal_event WHERE run_id = $1 ORDER BY seq", id)
	require.NoError(t, err)
	msgs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	events := strings.Join(msgs, "\n")
	require.Contains(t, events, "fetching file://***@localhost"+repo.Bare+" (branch main)")
	oldB64 := base64.StdEncoding.EncodeToString(oldKey)
	dump := dbtest.Dump(t, dbURL)
	requireNoSecretIn(t, dump, password, base64.StdEncoding.EncodeToString([]byte(password)), hex.EncodeToString([]byte(password)), oldB64)
	requireNoSecretIn(t, events+p.Logs.String(), password, oldB64)

	// Rotation: the new key in SLUICE_SECRET_KEY, the key file's as the
	// previous one. The start re-seals, and syncs go on.
	newKey, err := secretbox.NewKey()
	require.NoError(t, err)
	newB64 := base64.StdEncoding.EncodeToString(newKey[:])
	rotating := append(env[:len(env):len(env)], "SLUICE_SECRET_KEY="+newB64, "SLUICE_SECRET_KEY_PREVIOUS="+oldB64)
	p, _ = startServe(t, rotating...)
	require.Contains(t, p.Logs.String(), "re-sealed Git credentials with the current key")
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	p.term()
	requireNoSecretIn(t, p.Logs.String(), password, oldB64, newB64)

	// The old key alone (the key file) no longer opens them: the start
	// stops and says which key it needs.
	cmd := exec.Command(sluiceBin, "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "SLUICE_LISTEN=" + proctest.FreeAddr(t)}, env...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "The Git credentials of source default were sealed with another key (id ")
	require.Contains(t, string(out), ") than the key file "+keyFile+" (id ")
	require.Contains(t, string(out), "SLUICE_SECRET_KEY")
	requireNoSecretIn(t, string(out), password, oldB64, newB64)

	// The new key alone does.
	p, _ = startServe(t, append(env[:len(env):len(env)], "SLUICE_SECRET_KEY="+newB64)...)
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	p.term()
}

func TestServeConfigMetricsPublic(t *testing.T) {
	t.Parallel()
	cfg, err := loadServeConfig(envOf())
	require.NoError(t, err)
	require.False(t, cfg.MetricsPublic, "/metrics needs a token by default")
	cfg, err = loadServeConfig(envOf("SLUICE_METRICS_PUBLIC=true"))
	require.NoError(t, err)
	require.True(t, cfg.MetricsPublic)
	_, err = loadServeConfig(envOf("SLUICE_METRICS_PUBLIC=yes please"))
	require.ErrorContains(t, err, "SLUICE_METRICS_PUBLIC must be true or false")
}

func TestServeConfigJournalRetention(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cfg, err := loadServeConfig(envOf("SLUICE_DATA_DIR=" + dataDir))
	require.NoError(t, err)
	require.Equal(t, retention.Policy{Keep: retention.DefaultKeep, KeepLast: 10, ArchiveDir: filepath.Join(dataDir, "journal-archive")}, cfg.Retention)

	cfg, err = loadServeConfig(envOf("SLUICE_JOURNAL_RETENTION=off", "SLUICE_JOURNAL_KEEP_LAST=0", "SLUICE_JOURNAL_ARCHIVE_DIR=off"))
	require.NoError(t, err)
	require.Equal(t, retention.Policy{}, cfg.Retention)

	cfg, err = loadServeConfig(envOf("SLUICE_JOURNAL_RETENTION=400d", "SLUICE_JOURNAL_ARCHIVE_DIR=/var/lib/sluice-archive"))
	require.NoError(t, err)
	require.Equal(t, 400*24*time.Hour, cfg.Retention.Keep)
	require.Equal(t, "/var/lib/sluice-archive", cfg.Retention.ArchiveDir)

	for env, msg := range map[string]string{
		"SLUICE_JOURNAL_RETENTION=7d":   "SLUICE_JOURNAL_RETENTION: \"7d\" keeps less than 31 days",
		"SLUICE_JOURNAL_RETENTION=1y":   "SLUICE_JOURNAL_RETENTION: \"1y\" is neither off",
		"SLUICE_JOURNAL_KEEP_LAST=-1":   "SLUICE_JOURNAL_KEEP_LAST must be a whole number of 0 or more",
		"SLUICE_JOURNAL_KEEP_LAST=many": "SLUICE_JOURNAL_KEEP_LAST",
	} {
		_, err := loadServeConfig(envOf(env))
		require.ErrorContains(t, err, msg, env)
	}
}
