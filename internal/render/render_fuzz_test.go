package render_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/render"
	"sluice/internal/servicespec"
	"sluice/internal/unit"
)

// FuzzRenderLines checks the unit file's structure, whatever the manifest's
// values: Render refuses exactly the manifests its documentation says it
// refuses, and a unit file it writes is valid UTF-8 without a NUL, has one
// line per key and value (so no value can add a line, a section or a
// comment: every character but the line ends is printable), each line being
// the key, "=" and one quoted string, and the hash is that of the text.
func FuzzRenderLines(f *testing.F) {
	s := sample()
	f.Add(s.Service, s.ArtifactDigest, s.WorkDir, s.StopTimeoutSec, s.Args[0], s.Args[1], s.Args[3], "PORT", s.Env["_MOTD"], "Latin1", s.Env["Latin1"])
	f.Add("a", digest, "", 0, "", "", "", "A", "", "B", "")
	f.Add("a-1", digest, "/srv/../etc", 3600, "\n[Service]\nName=\"evil\"", "#\r\n", "x\u2028y\u2029z\u0085", "_", "\"\nEnv=X=\"1", "a1", "\v\f\x1b[2J\u202e")
	f.Add("web", digest, "/srv\x00", 1, "\x00", "", "", "A", "\x00", "B", "")
	f.Add("web", digest, "\xff\xfe", 10, "\xed\xa0\x80", "\\", "\\x00", "Z9", "\"\\\"", "z_", "é")
	f.Add("web\n", digest, "", 10, "", "", "", "A", "", "A", "")
	f.Add("Web", digest, "", 10, "", "", "", "1A", "", "A=B", "")
	f.Add("-web", digest+"\n", "", -1, "", "", "", "", "", "A", "")
	f.Add(strings.Repeat("a", 64), strings.ToUpper(digest), "", 3601, "", "", "", "A", "", "B", "")
	f.Add(strings.Repeat("a", 63), "sha256:"+strings.Repeat("0", 63), "", 1<<40, "", "", "", "A", "", "B", "")
	f.Fuzz(func(t *testing.T, service, dig, workDir string, timeout int, arg0, arg1, arg2, k0, v0, k1, v1 string) {
		m := render.Manifest{
			Service: service, ArtifactDigest: dig, WorkDir: workDir, StopTimeoutSec: timeout,
			Args: []string{arg0, arg1, arg2},
			Env:  map[string]string{k0: v0, k1: v1},
		}
		text, hash, err := render.Render(m)
		if err != nil {
			require.True(t, errs.Is(err, errs.Invalid), "%v", err)
			require.Nil(t, text)
			require.Empty(t, hash)
			require.False(t, manifestValid(m), "refused a valid manifest: %v", err)
			return
		}
		require.True(t, manifestValid(m), "rendered an invalid manifest:\n%s", text)
		requireUnitFile(t, m, text, hash)

		got, err := render.Parse(text)
		require.NoError(t, err, "%s", text)
		require.Equal(t, normalize(m), got)
		again, hash2, err := render.Render(m)
		require.NoError(t, err)
		require.Equal(t, string(text), string(again), "rendering is deterministic")
		require.Equal(t, hash, hash2)
	})
}

// FuzzRenderSpec checks the path from a Service unit file to its unit file,
// as sync and the service actions take it (unit.Parse, then
// servicespec.Parse of the canonical content, then Render): a spec that
// servicespec accepts always renders, to a well-formed unit file (see
// FuzzRenderLines) that holds exactly the spec's values. Reading the file as
// written gives the same unit file as reading its canonical content, except
// where the spec has two keys that encoding/json folds together ("args" and
// "ARGS", or "argſ"): servicespec matches field names case-insensitively,
// so the key that wins depends on key order, which the canonical form
// changes.
func FuzzRenderSpec(f *testing.F) {
	good := `{"runtime":"exec","image":"web@` + digest + `","args":["--listen",":8080"],"env":{"PORT":"8080"},"workDir":"/srv/web","probe":{"http":"http://127.0.0.1:8080/healthz","timeoutSec":5},"stopTimeoutSec":30,"onProbeFailure":"rollback","driftMode":"enforce"}`
	for _, seed := range []struct{ name, spec string }{
		{"web", good},
		{"a", `{"runtime":"exec","image":"` + digest + `"}`},
		{"a", `{"runtime":"exec","image":"` + digest + `","args":[],"env":{},"stopTimeoutSec":0}`},
		// Values that would inject lines into a naive unit file.
		{"web", `{"runtime":"exec","image":"` + digest + `","args":["\n[Service]\nName=\"evil\"","#","\r","\u2028\u2029\u0085\u202e"],"env":{"A":"\"\nEnv=B=\"1"},"workDir":"/srv/\nArg=x"}`},
		// NUL, lone surrogates and escapes of every kind.
		{"web", `{"runtime":"exec","image":"` + digest + `","args":["\u0000"]}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"A":"x\u0000"}}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","workDir":"/\u0000"}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","args":["\ud800","\udc00\ud83d\ude00","\/\b\f\t\u001f\u007f"]}`},
		// Paths: relative, with .., with a trailing slash.
		{"web", `{"runtime":"exec","image":"` + digest + `","workDir":"../etc"}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","workDir":"/srv/../../etc/"}`},
		// Numbers: huge, negative, fractional, written oddly.
		{"web", `{"runtime":"exec","image":"` + digest + `","stopTimeoutSec":1e3}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","stopTimeoutSec":3601}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","stopTimeoutSec":-1}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","stopTimeoutSec":1.5}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","stopTimeoutSec":99999999999999999999}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","probe":{"http":"http://x","timeoutSec":1e400}}`},
		// Keys twice, also folded together by case.
		{"web", `{"runtime":"exec","image":"` + digest + `","args":["a"],"args":["b"]}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","args":["--safe"],"ARGS":["--evil"]}`},
		{"web", `{"RUNTIME":"exec","Image":"` + digest + `","argſ":["x"],"probe":{"HTTP":"http://x"}}`},
		// Not a spec, or a bad name, environment name or image.
		{"web", `null`}, {"web", `[]`}, {"web", `{}`}, {"web", `{"runtime":"exec","image":"nginx:1"}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","unknown":1}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"1A":"x"}}`},
		// Secret references, good and bad.
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"A":"x","DB":{"secretRef":"db-password"}}}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"1DB":{"secretRef":"db"}}}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"DB":{"secretRef":"Bad Name"}}}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"DB":{"secretRef":"db","x":1}}}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"DB":{}}}`},
		{"web", `{"runtime":"exec","image":"` + digest + `","env":{"DB":1}}`},
		{"Web", `{"runtime":"exec","image":"` + digest + `"}`},
		{"web\n", `{"runtime":"exec","image":"` + digest + `"}`},
		{strings.Repeat("a", 64), `{"runtime":"exec","image":"` + digest + `"}`},
		{"web", `{"runtime":"exec","image":"` + digest + `"` + strings.Repeat(`,"args":[`, 300) + strings.Repeat("]", 300) + `}`},
	} {
		f.Add(seed.name, []byte(seed.spec))
	}
	f.Fuzz(func(t *testing.T, name string, spec []byte) {
		nameJSON, err := json.Marshal(name)
		require.NoError(t, err)
		file := []byte(`{"kind":"Service","metadata":{"name":` + string(nameJSON) + `},"spec":` + string(spec) + "}")
		u, err := unit.Parse("apps/web.json", file)
		if err != nil {
			return // the sync lists the file as invalid; no service reads it
		}
		s, err := servicespec.Parse(u.Name, u.Content)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		m := s.Manifest(u.Name)
		text, hash, err := render.Render(m)
		require.NoError(t, err, "servicespec accepted a spec the renderer refuses")
		requireUnitFile(t, m, text, hash)

		got, err := render.Parse(text)
		require.NoError(t, err, "%s", text)
		require.Equal(t, u.Name, got.Service)
		require.Equal(t, s.Digest(), got.ArtifactDigest)
		require.True(t, strings.HasSuffix(s.Image, got.ArtifactDigest), "%q pins %q", s.Image, got.ArtifactDigest)
		if len(s.Args) > 0 || len(got.Args) > 0 {
			require.Equal(t, s.Args, got.Args)
		}
		if len(s.PlainEnv()) > 0 || len(got.Env) > 0 {
			require.Equal(t, s.PlainEnv(), got.Env)
		}
		for k := range s.SecretEnv() {
			require.NotContains(t, got.Env, k, "a secret's variable rendered as a plain value")
		}
		require.Equal(t, s.WorkDir, got.WorkDir)
		require.True(t, s.WorkDir == "" || strings.HasPrefix(s.WorkDir, "/"), "a relative working directory %q", s.WorkDir)
		want := s.StopTimeoutSec
		if want == 0 {
			want = render.DefaultStopTimeoutSec
		}
		require.Equal(t, want, got.StopTimeoutSec)

		if foldedKeys(u.Content) {
			return
		}
		written, err := servicespec.Parse(u.Name, file)
		require.NoError(t, err, "the file as written reads otherwise than its canonical content")
		text2, hash2, err := render.Render(written.Manifest(u.Name))
		require.NoError(t, err)
		require.Equal(t, string(text), string(text2))
		require.Equal(t, hash, hash2)
	})
}

// manifestValid is what Render's documentation asks of a manifest, written
// without its regular expressions.
func manifestValid(m render.Manifest) bool {
	okService := len(m.Service) >= 1 && len(m.Service) <= 63 && m.Service[0] != '-'
	for _, c := range []byte(m.Service) {
		okService = okService && ('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-')
	}
	hexPart, okDigest := strings.CutPrefix(m.ArtifactDigest, "sha256:")
	okDigest = okDigest && len(hexPart) == 64 && strings.Trim(hexPart, "0123456789abcdef") == ""
	ok := okService && okDigest && m.StopTimeoutSec >= 0 && m.StopTimeoutSec <= render.MaxStopTimeoutSec &&
		!strings.Contains(m.WorkDir, "\x00")
	for _, a := range m.Args {
		ok = ok && !strings.Contains(a, "\x00")
	}
	for k, v := range m.Env {
		okKey := k != "" && !('0' <= k[0] && k[0] <= '9')
		for _, c := range []byte(k) {
			okKey = okKey && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_')
		}
		ok = ok && okKey && !strings.Contains(v, "\x00")
	}
	return ok
}

// requireUnitFile checks that text, rendered from m with hash, is well
// formed whatever m's values are.
func requireUnitFile(t *testing.T, m render.Manifest, text []byte, hash string) {
	t.Helper()
	sum := sha256.Sum256(text)
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), hash)
	require.Equal(t, hash, render.Hash(text))
	require.True(t, utf8.Valid(text), "%q", text)
	require.NotContains(t, string(text), "\x00")
	require.True(t, strings.HasSuffix(string(text), "\n"), "%q", text)

	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	require.Len(t, lines, 6+len(m.Args)+len(m.Env), "one line per value:\n%s", text)
	require.True(t, strings.HasPrefix(lines[0], "# "), "%q", lines[0])
	require.Equal(t, "[Service]", lines[1])
	for i, line := range lines {
		for _, r := range line {
			require.True(t, unicode.IsPrint(r), "line %d has %U, which an editor or a line reader may take for a line end or hide: %q", i+1, r, line)
		}
		if i < 2 {
			continue
		}
		key, rest, ok := strings.Cut(line, "=")
		require.True(t, ok, "%q", line)
		switch {
		case i == 5:
			require.Equal(t, "StopTimeoutSec", key)
			n, err := strconv.Atoi(rest)
			require.NoError(t, err)
			require.Equal(t, rest, strconv.Itoa(n))
			continue
		case i >= 6+len(m.Args):
			require.Equal(t, "Env", key, "%q", line)
			var name string
			name, rest, ok = strings.Cut(rest, "=")
			require.True(t, ok, "%q", line)
			require.Equal(t, slices.Sorted(maps.Keys(m.Env))[i-6-len(m.Args)], name, "Env lines in name order")
		case i >= 6:
			require.Equal(t, "Arg", key, "%q", line)
		default:
			require.Equal(t, []string{"Name", "Artifact", "WorkDir"}[i-2], key)
		}
		q, err := strconv.QuotedPrefix(rest)
		require.NoError(t, err, "%q", line)
		require.Equal(t, rest, q, "the value is one quoted string and nothing else: %q", line)
		require.Equal(t, byte('"'), q[0])
	}
}

// foldedKeys reports whether the canonical unit content, its spec or the
// spec's probe has two keys that encoding/json matches to the same field.
func foldedKeys(content []byte) bool {
	folded := func(raw json.RawMessage) (map[string]json.RawMessage, bool) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil, false
		}
		keys := slices.Sorted(maps.Keys(obj))
		for i, a := range keys {
			for _, b := range keys[i+1:] {
				if strings.EqualFold(a, b) {
					return obj, true
				}
			}
		}
		return obj, false
	}
	field := func(obj map[string]json.RawMessage, name string) json.RawMessage {
		for k, v := range obj {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return nil
	}
	top, bad := folded(content)
	if bad {
		return true
	}
	spec, bad := folded(field(top, "spec"))
	if bad {
		return true
	}
	_, bad = folded(field(spec, "probe"))
	return bad
}
