package render_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/render"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"

func sample() render.Manifest {
	return render.Manifest{
		Service:        "web",
		ArtifactDigest: digest,
		Args:           []string{"--listen", ":8080", "--greeting", "hello, \"world\"\n"},
		Env: map[string]string{
			"PORT":      "8080",
			"DATABASE":  "postgres://app@db/app?sslmode=disable",
			"_MOTD":     "  # not a comment = not a key  ",
			"Latin1":    "caf\xe9",
			"path_like": `C:\Program Files\x`,
		},
		WorkDir:        "/srv/web",
		StopTimeoutSec: 30,
	}
}

// normalize is m as Parse returns it: the default timeout filled in, and
// empty Args and Env as nil.
func normalize(m render.Manifest) render.Manifest {
	if m.StopTimeoutSec == 0 {
		m.StopTimeoutSec = render.DefaultStopTimeoutSec
	}
	if len(m.Args) == 0 {
		m.Args = nil
	}
	if len(m.Env) == 0 {
		m.Env = nil
	}
	if len(m.Secrets) == 0 {
		m.Secrets = nil
	}
	return m
}

// requireRoundTrip checks that m renders, parses back to itself, and that
// the parsed manifest renders the same bytes and hash.
func requireRoundTrip(t testing.TB, m render.Manifest) {
	t.Helper()
	text, hash, err := render.Render(m)
	require.NoError(t, err)
	got, err := render.Parse(text)
	require.NoError(t, err, "%s", text)
	require.Equal(t, normalize(m), got, "%s", text)
	again, hash2, err := render.Render(got)
	require.NoError(t, err)
	require.Equal(t, string(text), string(again))
	require.Equal(t, hash, hash2)
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()

	text, hash, err := render.Render(sample())
	require.NoError(t, err)
	golden := filepath.Join("testdata", "golden", "web.unit")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
		require.NoError(t, os.WriteFile(golden, text, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test ./internal/render/ -run TestRenderGolden -update to create it")
	require.Equal(t, string(want), string(text))
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, hash)
	requireRoundTrip(t, sample())
}

func TestRenderIsDeterministic(t *testing.T) {
	t.Parallel()

	first, hash, err := render.Render(sample())
	require.NoError(t, err)
	for range 50 {
		// A map built in another insertion order iterates differently.
		m := sample()
		keys := make([]string, 0, len(m.Env))
		for k := range m.Env {
			keys = append(keys, k)
		}
		rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		env := map[string]string{}
		for _, k := range keys {
			env[k] = m.Env[k]
		}
		m.Env = env
		text, h, err := render.Render(m)
		require.NoError(t, err)
		require.Equal(t, string(first), string(text))
		require.Equal(t, hash, h)
	}

	t.Run("DefaultTimeoutAndEmptyCollectionsRenderAsTheirEquivalents", func(t *testing.T) {
		t.Parallel()
		a := render.Manifest{Service: "a", ArtifactDigest: digest, Args: []string{}, Env: map[string]string{}}
		b := render.Manifest{Service: "a", ArtifactDigest: digest, StopTimeoutSec: render.DefaultStopTimeoutSec}
		ta, ha, err := render.Render(a)
		require.NoError(t, err)
		tb, hb, err := render.Render(b)
		require.NoError(t, err)
		require.Equal(t, string(ta), string(tb))
		require.Equal(t, ha, hb)
	})

	t.Run("AnyChangeChangesTheHash", func(t *testing.T) {
		t.Parallel()
		_, base, err := render.Render(sample())
		require.NoError(t, err)
		for _, change := range []func(*render.Manifest){
			func(m *render.Manifest) { m.Service = "web2" },
			func(m *render.Manifest) { m.ArtifactDigest = "sha256:" + strings.Repeat("0", 64) },
			func(m *render.Manifest) { m.Args = append(m.Args, "") },
			func(m *render.Manifest) { m.Args[0], m.Args[1] = m.Args[1], m.Args[0] },
			func(m *render.Manifest) { m.Env["EMPTY"] = "" },
			func(m *render.Manifest) { m.Env["PORT"] = "8081" },
			func(m *render.Manifest) { m.WorkDir = "" },
			func(m *render.Manifest) { m.StopTimeoutSec = 31 },
		} {
			m := sample()
			change(&m)
			_, h, err := render.Render(m)
			require.NoError(t, err)
			require.NotEqual(t, base, h)
		}
	})
}

// hostile are pieces that would break a naive line format.
var hostile = []string{
	"\n", "\r\n", "\r", `"`, `\`, `\"`, "=", "#", ";", " ", "\t", "  ", "'", "`",
	"\xff", "\xc3", "\xe2\x80", "é", "日本", "\u2028", "\u202e", "\ufeff", "\x7f", "\x1b[31m",
	"[Service]", "\nArg=\"injected\"", "\nEnv=X=\"y\"", "Name=\"evil\"", "${HOME}", "$(id)",
	"%s", "\\n", "\\x00", "\"\n[Service]\nName=\"x", "\U0010ffff", "\xed\xa0\x80", // a surrogate, invalid UTF-8
}

func hostileString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(6) {
		if r.IntN(3) == 0 {
			b.WriteString(fmt.Sprintf("w%d", r.IntN(100)))
		} else {
			b.WriteString(hostile[r.IntN(len(hostile))])
		}
	}
	if r.IntN(4) == 0 {
		// Raw random bytes (no NUL, which Render refuses).
		for range r.IntN(8) {
			b.WriteByte(byte(1 + r.IntN(255)))
		}
	}
	return b.String()
}

func randomManifest(r *rand.Rand) render.Manifest {
	const nameChars = "abcdefghijklmnopqrstuvwxyz0123456789-"
	name := []byte{nameChars[r.IntN(36)]}
	for range r.IntN(63) {
		name = append(name, nameChars[r.IntN(len(nameChars))])
	}
	hexd := make([]byte, 64)
	for i := range hexd {
		hexd[i] = "0123456789abcdef"[r.IntN(16)]
	}
	m := render.Manifest{
		Service:        string(name),
		ArtifactDigest: "sha256:" + string(hexd),
		WorkDir:        hostileString(r),
		StopTimeoutSec: r.IntN(render.MaxStopTimeoutSec + 1),
	}
	if r.IntN(2) == 0 {
		m.StopTimeoutSec = 0
	}
	for range r.IntN(5) {
		m.Args = append(m.Args, hostileString(r))
	}
	if r.IntN(5) == 0 {
		m.Args = []string{}
	}
	const keyFirst = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
	n := r.IntN(5)
	if n > 0 || r.IntN(2) == 0 {
		m.Env = map[string]string{}
	}
	for range n {
		key := []byte{keyFirst[r.IntN(len(keyFirst))]}
		for range r.IntN(8) {
			key = append(key, (keyFirst + "0123456789")[r.IntN(len(keyFirst)+10)])
		}
		m.Env[string(key)] = hostileString(r)
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()

	t.Run("RandomManifestsWithHostileStrings", func(t *testing.T) {
		t.Parallel()
		r := rand.New(rand.NewPCG(1, uint64(os.Getpid())))
		for range 5000 {
			requireRoundTrip(t, randomManifest(r))
		}
	})

	t.Run("EachHostilePieceAlone", func(t *testing.T) {
		t.Parallel()
		for _, h := range hostile {
			m := render.Manifest{
				Service: "x", ArtifactDigest: digest, WorkDir: h,
				Args: []string{h, "", h + h}, Env: map[string]string{"A": h, "B": ""},
			}
			requireRoundTrip(t, m)
			text, _, err := render.Render(m)
			require.NoError(t, err)
			// The structure is fixed: header, section, four keys, three Args, two Envs.
			require.Equal(t, 11, strings.Count(string(text), "\n"), "%s", text)
		}
	})

	t.Run("ValuesCannotInjectLines", func(t *testing.T) {
		t.Parallel()
		m := sample()
		m.Args = []string{"x\"\nArg=\"injected"}
		m.Env = map[string]string{"A": "1\"\nEnv=B=\"2"}
		text, _, err := render.Render(m)
		require.NoError(t, err)
		got, err := render.Parse(text)
		require.NoError(t, err)
		require.Equal(t, []string{"x\"\nArg=\"injected"}, got.Args)
		require.Equal(t, map[string]string{"A": "1\"\nEnv=B=\"2"}, got.Env)
	})
}

func TestRenderValidation(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		change func(*render.Manifest)
		want   string
	}{
		{"EmptyService", func(m *render.Manifest) { m.Service = "" }, "Service name"},
		{"UppercaseService", func(m *render.Manifest) { m.Service = "Web" }, "Service name"},
		{"ServiceStartingWithHyphen", func(m *render.Manifest) { m.Service = "-web" }, "Service name"},
		{"ServiceTooLong", func(m *render.Manifest) { m.Service = strings.Repeat("a", 64) }, "Service name"},
		{"ServiceWithNewline", func(m *render.Manifest) { m.Service = "web\n" }, "Service name"},
		{"EmptyDigest", func(m *render.Manifest) { m.ArtifactDigest = "" }, "artifact digest"},
		{"BareHexDigest", func(m *render.Manifest) { m.ArtifactDigest = strings.TrimPrefix(digest, "sha256:") }, "artifact digest"},
		{"UppercaseDigest", func(m *render.Manifest) { m.ArtifactDigest = strings.ToUpper(digest) }, "artifact digest"},
		{"NamedDigest", func(m *render.Manifest) { m.ArtifactDigest = "web@" + digest }, "artifact digest"},
		{"NegativeTimeout", func(m *render.Manifest) { m.StopTimeoutSec = -1 }, "stop timeout"},
		{"TimeoutTooLong", func(m *render.Manifest) { m.StopTimeoutSec = 3601 }, "stop timeout"},
		{"EnvKeyWithEquals", func(m *render.Manifest) { m.Env["A=B"] = "x" }, "environment variable name"},
		{"EnvKeyStartingWithDigit", func(m *render.Manifest) { m.Env["1A"] = "x" }, "environment variable name"},
		{"EmptyEnvKey", func(m *render.Manifest) { m.Env[""] = "x" }, "environment variable name"},
		{"EnvKeyWithSpace", func(m *render.Manifest) { m.Env["A B"] = "x" }, "environment variable name"},
		{"NULInArg", func(m *render.Manifest) { m.Args = []string{"a\x00b"} }, "argument 1 with a NUL byte"},
		{"NULInEnvValue", func(m *render.Manifest) { m.Env["A"] = "\x00" }, "A with a NUL byte"},
		{"EnvValuePastWhatExecveTakes", func(m *render.Manifest) { m.Env["A"] = strings.Repeat("x", render.MaxEnvString-len("A=")) }, "environment variable A of 131070 bytes; Linux starts no process with one over 131072 bytes"},
		{"NULInWorkDir", func(m *render.Manifest) { m.WorkDir = "/srv\x00" }, "working directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := sample()
			tc.change(&m)
			_, _, err := render.Render(m)
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasSuffix(err.Error(), "."), "a sentence: %v", err)
		})
	}

	t.Run("BoundariesAreAccepted", func(t *testing.T) {
		t.Parallel()
		for _, m := range []render.Manifest{
			{Service: "0", ArtifactDigest: digest, StopTimeoutSec: 1},
			{Service: strings.Repeat("a", 63), ArtifactDigest: digest, StopTimeoutSec: 3600},
			{Service: "a-", ArtifactDigest: digest, Env: map[string]string{"_": "", "a1": ""}},
		} {
			requireRoundTrip(t, m)
		}
	})
}

func TestParse(t *testing.T) {
	t.Parallel()

	good, _, err := render.Render(sample())
	require.NoError(t, err)

	t.Run("AcceptsCommentsBlankLinesAndEnvInAnyOrder", func(t *testing.T) {
		t.Parallel()
		text := "\n# hand-made\n[Service]\n\nName=\"web\"\nArtifact=\"" + digest + "\"\nWorkDir=\"\"\n" +
			"StopTimeoutSec=5\n# args follow\nArg=\"b\"\nArg=\"a\"\nEnv=Z=\"1\"\nEnv=A=\"2\"\n"
		m, err := render.Parse([]byte(text))
		require.NoError(t, err)
		require.Equal(t, render.Manifest{
			Service: "web", ArtifactDigest: digest, StopTimeoutSec: 5,
			Args: []string{"b", "a"}, Env: map[string]string{"A": "2", "Z": "1"},
		}, m)
	})

	for _, tc := range []struct {
		name string
		text string
		want string
	}{
		{"Empty", "", "no [Service] section"},
		{"KeyBeforeSection", "Name=\"web\"\n[Service]\n", "before the [Service] section"},
		{"TwoSections", "[Service]\n[Service]\n", "repeats the [Service] section"},
		{"UnknownKey", "[Service]\nUser=\"root\"\n", "unknown key"},
		{"NoEquals", "[Service]\nName\n", "not key=value"},
		{"RepeatedName", "[Service]\nName=\"a\"\nName=\"b\"\n", "repeats Name"},
		{"UnquotedValue", "[Service]\nName=web\n", "not a double-quoted string"},
		{"BackquotedValue", "[Service]\nName=`web`\n", "not a double-quoted string"},
		{"TrailingText", "[Service]\nName=\"web\" # comment\n", "not one double-quoted string"},
		{"TrailingCR", "[Service]\nName=\"web\"\r\n", "not one double-quoted string"},
		{"UnterminatedQuote", "[Service]\nName=\"web\n", "not one double-quoted string"},
		{"BadEscape", "[Service]\nName=\"\\q\"\n", "not one double-quoted string"},
		{"PaddedNumber", "[Service]\nStopTimeoutSec=+5\n", "not plain decimal"},
		{"LeadingZero", "[Service]\nStopTimeoutSec=05\n", "not plain decimal"},
		{"BadEnvName", "[Service]\nEnv=A-B=\"x\"\n", "not Env=NAME"},
		{"RepeatedEnv", "[Service]\nEnv=A=\"x\"\nEnv=A=\"y\"\n", "repeats environment variable A"},
		{"MissingArtifact", "[Service]\nName=\"web\"\nStopTimeoutSec=10\n", "no Artifact"},
		{"MissingTimeout", "[Service]\nName=\"web\"\nArtifact=\"" + digest + "\"\n", "no StopTimeoutSec"},
		{"ZeroTimeout", "[Service]\nName=\"web\"\nArtifact=\"" + digest + "\"\nStopTimeoutSec=0\n", "StopTimeoutSec=0"},
		{"InvalidManifest", "[Service]\nName=\"Web\"\nArtifact=\"" + digest + "\"\nStopTimeoutSec=10\n", "Service name"},
		{"NoFinalNewline", "[Service]\nName=\"web\"", "does not end with a newline"},
		{"TruncatedGolden", string(good[:len(good)/2]), "does not end with a newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := render.Parse([]byte(tc.text))
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestWriteAtomic(t *testing.T) {
	t.Parallel()

	t.Run("CreatesAndReplacesLeavingNoTemporaryFiles", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "web.unit")
		require.NoError(t, render.WriteAtomic(path, []byte("one\n")))
		require.NoError(t, render.WriteAtomic(path, []byte("two\n")))
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, "two\n", string(got))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
	})

	t.Run("ConcurrentWritersLeaveOneWholeFile", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "web.unit")
		texts := make([]string, 10)
		done := make(chan error, 10)
		for i := range 10 {
			texts[i] = strings.Repeat(fmt.Sprintf("%d", i), 100_000)
			go func() { done <- render.WriteAtomic(path, []byte(texts[i])) }()
		}
		for range 10 {
			require.NoError(t, <-done)
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Contains(t, texts, string(got))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
	})

	t.Run("MissingDirectoryFails", func(t *testing.T) {
		t.Parallel()
		err := render.WriteAtomic(filepath.Join(t.TempDir(), "nope", "web.unit"), []byte("x"))
		require.Error(t, err)
	})
}

func TestSecrets(t *testing.T) {
	t.Parallel()

	withSecrets := func(secrets map[string]render.SecretRef) render.Manifest {
		m := sample()
		m.Secrets = secrets
		return m
	}

	t.Run("RoundTripNamesNoValue", func(t *testing.T) {
		t.Parallel()
		m := withSecrets(map[string]render.SecretRef{
			"DB_PASSWORD": {Name: "db-password", Version: 3},
			"API_TOKEN":   {Scope: "payments", Name: "api.token_v2", Version: 12},
		})
		requireRoundTrip(t, m)
		text, _, err := render.Render(m)
		require.NoError(t, err)
		require.Contains(t, string(text), "Secret=API_TOKEN=\"payments/api.token_v2@12\"\nSecret=DB_PASSWORD=\"db-password@3\"\n")
	})

	t.Run("AnotherVersionIsAnotherUnit", func(t *testing.T) {
		t.Parallel()
		_, h3, err := render.Render(withSecrets(map[string]render.SecretRef{"DB": {Name: "db", Version: 3}}))
		require.NoError(t, err)
		_, h4, err := render.Render(withSecrets(map[string]render.SecretRef{"DB": {Name: "db", Version: 4}}))
		require.NoError(t, err)
		_, hs, err := render.Render(withSecrets(map[string]render.SecretRef{"DB": {Scope: "a", Name: "db", Version: 3}}))
		require.NoError(t, err)
		require.NotEqual(t, h3, h4)
		require.NotEqual(t, h3, hs)
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		for what, refs := range map[string]map[string]render.SecretRef{
			"both a value and a secret": {"PORT": {Name: "port", Version: 1}},
			"environment variable name": {"1DB": {Name: "db", Version: 1}},
			"version from 1":            {"DB": {Name: "db", Version: 0}},
			"not a secret's name":       {"DB": {Name: "Bad Name", Version: 1}},
			"no name":                   {"DB": {Scope: "a", Version: 1}},
			"bad scope":                 {"DB": {Scope: "A/B", Name: "db", Version: 1}},
		} {
			_, _, err := render.Render(withSecrets(refs))
			require.Error(t, err, what)
			require.True(t, errs.Is(err, errs.Invalid), "%s: %v", what, err)
		}
		for _, line := range []string{
			`Secret=DB="db"`, `Secret=DB="db@0"`, `Secret=DB="db@x"`, `Secret=DB="db@01"`, `Secret=DB="@1"`,
			`Secret=DB="a/b/c@1"`, `Secret=DB=db@1`, `Secret=1DB="db@1"`,
		} {
			text := "[Service]\nName=\"a\"\nArtifact=\"" + digest + "\"\nStopTimeoutSec=1\n" + line + "\n"
			_, err := render.Parse([]byte(text))
			require.Error(t, err, line)
		}
		dup := "[Service]\nName=\"a\"\nArtifact=\"" + digest + "\"\nStopTimeoutSec=1\nSecret=DB=\"db@1\"\nSecret=DB=\"db@2\"\n"
		_, err := render.Parse([]byte(dup))
		require.ErrorContains(t, err, "repeats secret variable DB")
	})
}

func TestUnitSecrets(t *testing.T) {
	t.Parallel()

	blob := strings.Repeat("a", 40)
	want := map[string]render.SecretRef{"DB": {Name: "db", Version: 3}, "KEY": {File: "s/app.env", Key: "KEY", Blob: blob}}
	exec := "[Service]\nName=\"web\"\nSecret=DB=\"db@3\"\nSecret=KEY=\"sops:s/app.env#KEY@" + blob + "\"\n"
	systemd := "[Unit]\nX-Sluice-Service=web\nX-Sluice-Secret=DB=\"db@3\"\nX-Sluice-Secret=KEY=\"sops:s/app.env#KEY@" + blob + "\"\n[Service]\nEnvironmentFile=/etc/sluice/secrets/web.env\n"
	require.Equal(t, want, render.UnitSecrets([]byte(exec)))
	require.Equal(t, want, render.UnitSecrets([]byte(systemd)))
	require.Nil(t, render.UnitSecrets([]byte("[Service]\nName=\"web\"\n")))
	require.Nil(t, render.UnitSecrets([]byte("Secret=DB=\"not a ref\"\n")), "a line that does not read names nothing")

	// The container and compose runtimes' units are JSON, their secrets an
	// object of references.
	container := `{"service": "web", "digest": "sha256:` + strings.Repeat("b", 64) + `", "secrets": {"DB": "db@3", "KEY": "sops:s/app.env#KEY@` + blob + `"}}`
	require.Equal(t, want, render.UnitSecrets([]byte(container)))
	require.Equal(t, want, render.UnitSecrets([]byte("\n  "+container)))
	require.Nil(t, render.UnitSecrets([]byte(`{"service": "web"}`)))
	require.Nil(t, render.UnitSecrets([]byte(`{"secrets": {"DB": "not a ref"}}`)), "a reference that does not read names nothing")
	require.Nil(t, render.UnitSecrets([]byte(`{"secrets": `)), "JSON that does not read names nothing")
}
