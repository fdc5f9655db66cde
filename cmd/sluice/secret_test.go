package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/proctest"
	"sluice/internal/secretbox"
	"sluice/internal/secrets"
)

func TestSecretCLI(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		p    *proc
		pool *pgxpool.Pool
		// store opens what serve sealed, with serve's key file.
		store *secrets.Service
		apps  uuid.UUID // a source
		// outputs is every stdout and stderr the CLI printed, for the
		// values to be looked for in all of them.
		outputs []string
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		dbURL := dbtest.NewDB(t)
		b := &testBundle{apps: uuid.New()}
		b.p, _ = startServe(t, "SLUICE_DATABASE_URL="+dbURL)
		var err error
		b.pool, err = pgxpool.New(t.Context(), dbURL)
		require.NoError(t, err)
		t.Cleanup(b.pool.Close)
		_, err = b.pool.Exec(t.Context(), `INSERT INTO source (id, name, repo_url) VALUES ($1, 'apps', 'file:///r')`, b.apps)
		require.NoError(t, err)
		key, _, err := secretbox.LoadKeyFile(filepath.Join(dataDir, "secret.key"))
		require.NoError(t, err)
		box, err := secretbox.New(secretbox.Opts{Key: key})
		require.NoError(t, err)
		b.store = &secrets.Service{DB: b.pool, Box: box}
		return b
	}
	b := setup(t)
	cliIn := func(stdin []byte, args ...string) (string, string, int) {
		t.Helper()
		var in *bytes.Reader
		if stdin != nil {
			in = bytes.NewReader(stdin)
		}
		var stdout, stderr string
		var code int
		if in != nil {
			stdout, stderr, code = b.p.cli(in, testToken, args...)
		} else {
			stdout, stderr, code = b.p.cli(nil, testToken, args...)
		}
		b.outputs = append(b.outputs, stdout, stderr)
		return stdout, stderr, code
	}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return cliIn(nil, args...)
	}
	resolve := func(t *testing.T, name string) (secrets.Ref, []byte) {
		t.Helper()
		ref, v, err := b.store.Resolve(t.Context(), b.pool, b.apps, name)
		require.NoError(t, err)
		return ref, v
	}
	// Values unique to the test, with what a shell or a terminal could trip on.
	fromStdin := []byte("Cs1-" + rand.Text() + "\n$HOME %s 'q' \"dq\" \x00\xff\n")
	fromFile := []byte("Cs2-" + rand.Text() + "\r\n\x00")
	onTheLine := "Cs3-" + rand.Text()

	t.Run("SetFromFileDashReadsStdinByteForByte", func(t *testing.T) {
		stdout, stderr, code := cliIn(fromStdin, "secret", "set", "db-password", "--from-file", "-")
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, `^Secret db-password set: version 1, \d+ bytes, global\. Receipt [0-9a-f-]{36}\.\n$`, stdout)
		require.Contains(t, stdout, fmt.Sprintf(", %d bytes,", len(fromStdin)))
		require.Contains(t, stderr, "ends with a line break, which is part of it")
		ref, v := resolve(t, "db-password")
		require.Equal(t, fromStdin, v)
		require.Equal(t, int32(1), ref.Version)
	})

	t.Run("SetFromAFileForASourceAndRotate", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "value")
		require.NoError(t, os.WriteFile(f, fromFile, 0o600))
		for _, want := range []string{"version 1", "version 2"} {
			stdout, stderr, code := cli("secret", "set", "db-password", "--source", "apps", "--from-file", f)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, stdout, fmt.Sprintf("Secret db-password set: %s, %d bytes, for source apps.", want, len(fromFile)))
			require.NotContains(t, stderr, "line break", "the value ends with a NUL")
		}
		ref, v := resolve(t, "db-password")
		require.Equal(t, fromFile, v, "the source's secret wins for its units")
		require.Equal(t, "apps", ref.Scope)
		require.Equal(t, int32(2), ref.Version)
	})

	t.Run("ListShowsNamesScopesAndVersionsOnly", func(t *testing.T) {
		stdout, stderr, code := cli("secret", "list")
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 3, stdout)
		require.Equal(t, []string{"NAME", "SOURCE", "VERSION", "SET", "BY", "SET", "AT"}, strings.Fields(lines[0]))
		require.Equal(t, []string{"db-password", "(global)", "1", "bootstrap"}, strings.Fields(lines[1])[:4])
		require.Equal(t, []string{"db-password", "apps", "2", "bootstrap"}, strings.Fields(lines[2])[:4])

		stdout, stderr, code = cli("secret", "list", "--json")
		require.Equal(t, 0, code, stderr)
		var list []map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &list), stdout)
		require.Len(t, list, 2)
		for _, s := range list {
			require.NotContains(t, s, "value")
		}
	})

	t.Run("RmDeletesAndNamesTheVersion", func(t *testing.T) {
		stdout, stderr, code := cli("secret", "rm", "db-password", "--source", "apps")
		require.Equal(t, 0, code, stderr)
		require.Regexp(t, `^Secret db-password deleted \(for source apps\) at version 2; setting it again makes version 3\. Receipt [0-9a-f-]{36}\.\n$`, stdout)
		_, v := resolve(t, "db-password")
		require.Equal(t, fromStdin, v, "the global one serves the source's units again")
		_, stderr, code = cli("secret", "rm", "db-password", "--source", "apps")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "No secret db-password is set for source apps; `sluice secret list` lists them.")
	})

	t.Run("AValueCannotBeGivenOnTheCommandLine", func(t *testing.T) {
		_, stderr, code := cli("secret", "set", "token", onTheLine)
		require.Equal(t, 2, code)
		require.Contains(t, stderr, "sluice secret set: takes one argument")
		for _, flag := range []string{"--value", "--secret", "--data", "--from-literal"} {
			_, stderr, code = cli("secret", "set", "token", flag, onTheLine)
			require.Equal(t, 2, code, flag)
			require.Contains(t, stderr, "flag provided but not defined: "+strings.TrimPrefix(flag, "-"))
			_, stderr, code = cli("secret", "set", "token", flag+"="+onTheLine)
			require.Equal(t, 2, code, flag)
		}
		_, stderr, code = cli("secret", "set", "token")
		require.Equal(t, 2, code)
		require.Contains(t, stderr, "needs --from-file FILE (or --from-file - for stdin): a value is never an argument")
		// Its only flags are where the value comes from and its scope.
		_, stderr, code = cli("secret", "set", "-h")
		require.Equal(t, 0, code)
		var flags []string
		for _, line := range strings.Split(stderr, "\n") {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "-"); ok {
				flags = append(flags, strings.Fields(f)[0])
			}
		}
		require.Equal(t, []string{"from-file", "source"}, flags)
		_, err := b.store.Lookup(t.Context(), b.pool, b.apps, "token")
		require.Error(t, err, "nothing was set")
	})

	t.Run("AnEmptyOrTooLargeValueIsRefusedBeforeSending", func(t *testing.T) {
		_, stderr, code := cliIn([]byte{}, "secret", "set", "empty", "--from-file", "-")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "the value in stdin is empty; a secret holds 1 byte to 1 MiB")
		big := filepath.Join(t.TempDir(), "big")
		require.NoError(t, os.WriteFile(big, make([]byte, secrets.MaxValue+1), 0o600))
		_, stderr, code = cli("secret", "set", "big", "--from-file", big)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "is larger than 1048576 bytes (1 MiB), the most a secret holds")
		require.NoError(t, os.WriteFile(big, make([]byte, secrets.MaxValue), 0o600))
		stdout, stderr, code := cli("secret", "set", "big", "--from-file", big)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "1048576 bytes")
	})

	t.Run("HelpListsTheCommands", func(t *testing.T) {
		stdout, _, code := cli("--help")
		require.Equal(t, 0, code)
		require.Contains(t, stdout, "sluice secret set NAME [--source S] --from-file FILE")
		require.Contains(t, stdout, "sluice secret list | rm NAME [--source S]")
	})

	t.Run("NoOutputHoldsAValue", func(t *testing.T) {
		all := strings.Join(b.outputs, "\n") + b.p.Logs.String()
		for _, v := range [][]byte{fromStdin, fromFile, []byte(onTheLine), fromStdin[:30], fromFile[:30]} {
			for _, form := range []string{string(v), hex.EncodeToString(v), base64.StdEncoding.EncodeToString(v)} {
				require.NotContains(t, all, form)
			}
		}
	})
}

// TestServeSealsSecretsWithTheKey follows a secret through serve's starts:
// set under the key file, re-sealed at a rotation to SLUICE_SECRET_KEY,
// refused with a sentence by the old key alone, opened by the new one.
func TestServeSealsSecretsWithTheKey(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDB(t)
	dataDir := t.TempDir()
	keyFile := filepath.Join(dataDir, "secret.key")
	env := []string{"SLUICE_DATABASE_URL=" + dbURL, "SLUICE_DATA_DIR=" + dataDir, "SLUICE_LOG_LEVEL=debug"}
	value := []byte("Ks-" + rand.Text() + "\n")
	var outputs []string

	p, _ := startServe(t, env...)
	stdout, stderr, code := p.cli(bytes.NewReader(value), testToken, "secret", "set", "api-token", "--from-file", "-")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Secret api-token set: version 1")
	p.term()
	outputs = append(outputs, stdout, stderr, p.Logs.String())
	oldKey, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	oldB64 := base64.StdEncoding.EncodeToString(oldKey)

	// Rotation: the new key in SLUICE_SECRET_KEY, the key file's as the
	// previous one. The start re-seals the secret.
	newKey, err := secretbox.NewKey()
	require.NoError(t, err)
	newB64 := base64.StdEncoding.EncodeToString(newKey[:])
	p, _ = startServe(t, append(env[:len(env):len(env)], "SLUICE_SECRET_KEY="+newB64, "SLUICE_SECRET_KEY_PREVIOUS="+oldB64)...)
	require.Contains(t, p.Logs.String(), "re-sealed secrets with the current key")
	p.term()
	outputs = append(outputs, p.Logs.String())

	// The old key alone no longer opens it: the start stops, in one
	// sentence that names the key it needs.
	cmd := exec.Command(sluiceBin, "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "SLUICE_LISTEN=" + proctest.FreeAddr(t)}, env...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "Secret secret/api-token v1 was sealed with another key (id ")
	require.Contains(t, string(out), ") than the key file "+keyFile+" (id ")
	outputs = append(outputs, string(out))

	// The new key alone opens it, at the same version.
	p, _ = startServe(t, append(env[:len(env):len(env)], "SLUICE_SECRET_KEY="+newB64)...)
	stdout, stderr, code = p.cli(nil, testToken, "secret", "list")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `(?m)^api-token\s+\(global\)\s+1\s+bootstrap\s`, stdout)
	p.term()
	outputs = append(outputs, stdout, stderr, p.Logs.String())

	all := strings.Join(outputs, "\n")
	for _, s := range []string{string(value), strings.TrimSpace(string(value)), base64.StdEncoding.EncodeToString(value), oldB64, newB64} {
		require.NotContains(t, all, s)
	}
}
