package unit

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
)

func TestCanonical(t *testing.T) {
	t.Parallel()

	tests := []struct{ name, in, want string }{
		{
			"SortsKeysAndDropsWhitespace",
			"{\n  \"spec\": {\"z\": 1, \"a\": [ 1, 2 ]},\n\t\"kind\" : \"Service\"\n}\n",
			`{"kind":"Service","spec":{"a":[1,2],"z":1}}`,
		},
		{
			"KeepsNumbersExactlyAsWritten",
			`{"a": 1.0, "b": 1e3, "c": 12345678901234567890, "d": -0, "e": 1E+3, "f": 0.1000}`,
			`{"a":1.0,"b":1e3,"c":12345678901234567890,"d":-0,"e":1E+3,"f":0.1000}`,
		},
		{
			"LeavesHTMLCharactersAndUnicodeLiteral",
			`{"html": "<a href=\"/x?a=1&b=2\">x</a>", "text": "héllo ✓ 😀", "sep": "a` + "\u2028" + `b"}`,
			`{"html":"<a href=\"/x?a=1&b=2\">x</a>","sep":"a` + "\u2028" + `b","text":"héllo ✓ 😀"}`,
		},
		{
			"DecodesNeedlessEscapesAndKeepsRequiredOnes",
			`{"s": "\u0041\u00e9\ud83d\ude00 \/ \"q\" \\ \t\n\r\b\f \u0001 \u001f"}`,
			`{"s":"Aé😀 / \"q\" \\ \t\n\r\b\f \u0001 \u001f"}`,
		},
		{
			"SortsObjectsInsideNestedArraysButKeepsArrayOrder",
			`{"list": [{"b": 1, "a": 2}, [{"d": [{"z": 1, "y": 2}], "c": 3}], "x"]}`,
			`{"list":[{"a":2,"b":1},[{"c":3,"d":[{"y":2,"z":1}]}],"x"]}`,
		},
		{
			"SortsKeysByBytes",
			`{"b": 1, "B": 2, "é": 3, "a": 4, "": 5}`,
			`{"":5,"B":2,"a":4,"b":1,"é":3}`,
		},
		{
			"AcceptsAnyTopLevelValue",
			` [ true, false, null, "x" ] `,
			`[true,false,null,"x"]`,
		},
	}
	for _, tt := range tests {
		got, err := Canonical([]byte(tt.in))
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, string(got), tt.name)

		again, err := Canonical(got)
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, string(again), "%s: canonical form is a fixed point", tt.name)

		var before, after any
		require.NoError(t, json.Unmarshal([]byte(tt.in), &before), tt.name)
		require.NoError(t, json.Unmarshal(got, &after), tt.name)
		require.Equal(t, before, after, "%s: same meaning", tt.name)
	}
}

func TestCanonicalIgnoresLayoutAndKeyOrder(t *testing.T) {
	t.Parallel()

	compact := `{"kind":"Service","metadata":{"name":"web","labels":{"a":"1","b":"2"}},"spec":{"ports":[{"port":80,"name":"http"}],"image":"nginx"}}`
	indented := `{
    "spec": {
        "image": "nginx",
        "ports": [
            {
                "name": "http",
                "port": 80
            }
        ]
    },
    "metadata": {
        "labels": {"b": "2", "a": "1"},
        "name": "web"
    },
    "kind": "Service"
}
`
	a, err := Canonical([]byte(compact))
	require.NoError(t, err)
	b, err := Canonical([]byte(indented))
	require.NoError(t, err)
	require.Equal(t, string(a), string(b))

	ua, err := Parse("apps/web.json", []byte(compact))
	require.NoError(t, err)
	ub, err := Parse("apps/web.json", []byte(indented))
	require.NoError(t, err)
	require.Equal(t, ua.Hash, ub.Hash)
	require.Equal(t, string(a), string(ua.Content))
	sum := sha256.Sum256(a)
	require.Equal(t, hex.EncodeToString(sum[:]), ua.Hash)
}

func TestCanonicalErrors(t *testing.T) {
	t.Parallel()

	tests := []struct{ name, in, want string }{
		{"Empty", "  \n", "input is empty"},
		{"SyntaxWithPosition", "{\n  \"a\": 1,\n}", `input is not valid JSON: invalid character '}' looking for beginning of object key string (line 3, column 1)`},
		{"Truncated", `{"a": [1, 2`, "input is not valid JSON: it ends before the value is complete; check for a missing closing brace, bracket or quote"},
		{"TrailingData", "{\"a\": 1}\n{\"b\": 2}", "input has more data after the JSON value (line 2, column 1); a unit file holds exactly one JSON object"},
		{"DuplicateKey", "{\"a\": 1,\n \"b\": {\"c\": 1, \"c\": 2}}", `input has key "c" twice in the same object (line 2, column 16); keep only one`},
		{"DuplicateKeyWithEscapedQuote", `{"a\"": 1, "a\"": 2}`, `input has key "a\"" twice in the same object (line 1, column 12); keep only one`},
		{"InvalidUTF8", "{\"a\": \"ok\",\n \"b\": \"\xff\"}", "input is not valid UTF-8 (line 2, column 8); save the file as UTF-8"},
		{"ByteOrderMark", "\xef\xbb\xbf{}", "input starts with a byte order mark; save the file as UTF-8 without one"},
		{"TooDeep", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), "input is nested more than 10000 levels deep"},
	}
	for _, tt := range tests {
		_, err := Canonical([]byte(tt.in))
		require.Error(t, err, tt.name)
		require.True(t, strings.HasPrefix(err.Error(), tt.want), "%s: got %q, want prefix %q", tt.name, err.Error(), tt.want)
	}
}

func TestIdentityFor(t *testing.T) {
	t.Parallel()

	// UUID version 5 by hand (RFC 9562, section 5.5): SHA-1 of the namespace
	// bytes followed by the name, truncated to 16 bytes, with the version and
	// variant bits set.
	ns := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8") // the DNS namespace
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte("apps/web.json"))
	var want uuid.UUID
	copy(want[:], h.Sum(nil))
	want[6] = want[6]&0x0f | 0x50
	want[8] = want[8]&0x3f | 0x80

	require.Equal(t, want, IdentityFor("apps/web.json"))
	require.Equal(t, "11955739-8754-5473-9ff5-8feb058983d5", IdentityFor("apps/web.json").String(), "the value Python's uuid.uuid5 gives")
	require.Equal(t, IdentityFor("apps/web.json"), IdentityFor("apps/web.json"))
	require.NotEqual(t, IdentityFor("apps/web.json"), IdentityFor("apps/api.json"))
}

func TestParse(t *testing.T) {
	t.Parallel()

	t.Run("ReadsTheEnvelope", func(t *testing.T) {
		t.Parallel()

		u, err := Parse("apps/web.json", []byte(`{"kind": "Service", "metadata": {"name": "web", "labels": {"tier": "frontend"}}, "spec": {"image": "nginx"}, "extra": true}`))
		require.NoError(t, err)
		require.Equal(t, "apps/web.json", u.Path)
		require.Equal(t, "Service", u.Kind)
		require.Equal(t, "web", u.Name)
		require.Equal(t, map[string]string{"tier": "frontend"}, u.Labels)
		require.Equal(t, IdentityFor("apps/web.json"), u.ID)
		require.JSONEq(t, `{"extra":true,"kind":"Service","metadata":{"labels":{"tier":"frontend"},"name":"web"},"spec":{"image":"nginx"}}`, string(u.Content))
	})

	t.Run("AcceptsAFileOfExactlyMaxSize", func(t *testing.T) {
		t.Parallel()

		doc := `{"kind": "Service", "metadata": {"name": "web"}}`
		data := []byte(doc + strings.Repeat(" ", MaxSize-len(doc)))
		require.Len(t, data, MaxSize)
		_, err := Parse("apps/web.json", data)
		require.NoError(t, err)
	})

	t.Run("LeavesLabelsNilWhenThereAreNone", func(t *testing.T) {
		t.Parallel()

		for _, labels := range []string{``, `, "labels": null`, `, "labels": {}`} {
			u, err := Parse("a.json", []byte(`{"kind": "Service", "metadata": {"name": "web"`+labels+`}}`))
			require.NoError(t, err, labels)
			require.Nil(t, u.Labels, labels)
		}
	})

	t.Run("MetadataIDWinsWhenItIsAUUID", func(t *testing.T) {
		t.Parallel()

		id := "5f0c6d8e-2a53-4c1e-9b7a-3d2f1e0c9b8a"
		u, err := Parse("apps/web.json", []byte(`{"kind": "Service", "metadata": {"name": "web", "id": "`+id+`"}}`))
		require.NoError(t, err)
		require.Equal(t, uuid.MustParse(id), u.ID)

		moved, err := Parse("apps/renamed.json", []byte(`{"kind": "Service", "metadata": {"name": "web", "id": "`+strings.ToUpper(id)+`"}}`))
		require.NoError(t, err)
		require.Equal(t, u.ID, moved.ID, "the identity survives a rename and the case of the hex digits")
	})

	t.Run("IdentityFallsBackToThePathWhenMetadataIDIsNotAUUID", func(t *testing.T) {
		t.Parallel()

		for _, id := range []string{`"web"`, `""`, `42`, `null`, `{"uuid": "x"}`, `"00000000-0000-0000-0000-000000000000"`} {
			u, err := Parse("apps/web.json", []byte(`{"kind": "Service", "metadata": {"name": "web", "id": `+id+`}}`))
			require.NoError(t, err, id)
			require.Equal(t, IdentityFor("apps/web.json"), u.ID, id)
		}
	})
}

func TestParseErrors(t *testing.T) {
	t.Parallel()

	tests := []struct{ name, in, want string }{
		{"Empty", "", `apps/web.json: is empty; a unit is a JSON object with "kind", "metadata" and "spec"`},
		{"NotJSON", "kind: Service\n", `apps/web.json: is not valid JSON: invalid character 'k' looking for beginning of value (line 1, column 1)`},
		{"NotJSONSaysWhere", "{\"kind\": \"Service\",\n \"metadata\": {\"name\": 'web'}}", `apps/web.json: is not valid JSON: invalid character '\'' looking for beginning of value (line 2, column 23)`},
		{"Truncated", `{"kind": "Service", "metadata": {"name": "web"}`, `apps/web.json: is not valid JSON: it ends before the value is complete; check for a missing closing brace, bracket or quote`},
		{"TrailingData", `{"kind": "Service", "metadata": {"name": "web"}} {}`, `apps/web.json: has more data after the JSON value (line 1, column 50); a unit file holds exactly one JSON object`},
		{"NotAnObject", `[{"kind": "Service"}]`, `apps/web.json: is an array, not a JSON object; a unit looks like {"kind": "Service", "metadata": {"name": "web"}, "spec": {…}}`},
		{"MissingKind", `{"metadata": {"name": "web"}}`, `apps/web.json: has no "kind"; add one, such as "kind": "Service"`},
		{"KindNotAString", `{"kind": 7, "metadata": {"name": "web"}}`, `apps/web.json: has "kind" that is a number; it must be a non-empty string`},
		{"EmptyKind", `{"kind": "", "metadata": {"name": "web"}}`, `apps/web.json: has an empty "kind"; add one, such as "kind": "Service"`},
		{"MissingMetadata", `{"kind": "Service", "spec": {}}`, `apps/web.json: has no "metadata"; add "metadata": {"name": "…"}`},
		{"MetadataNotAnObject", `{"kind": "Service", "metadata": "web"}`, `apps/web.json: has "metadata" that is a string; it must be an object with at least "name"`},
		{"MissingName", `{"kind": "Service", "metadata": {"labels": {}}}`, `apps/web.json: has no "metadata.name"; give the unit a name`},
		{"NameNotAString", `{"kind": "Service", "metadata": {"name": null}}`, `apps/web.json: has "metadata.name" that is null; it must be a non-empty string`},
		{"EmptyName", `{"kind": "Service", "metadata": {"name": ""}}`, `apps/web.json: has an empty "metadata.name"; give the unit a name`},
		{"LabelsNotAnObject", `{"kind": "Service", "metadata": {"name": "web", "labels": ["a"]}}`, `apps/web.json: has "metadata.labels" that is an array; it must be an object of string values, such as {"tier": "web"}`},
		{"LabelValueNotAString", `{"kind": "Service", "metadata": {"name": "web", "labels": {"replicas": 3}}}`, `apps/web.json: has label "replicas" whose value is a number; label values must be strings, so quote it`},
		{"DuplicateKey", `{"kind": "Service", "kind": "Infrastructure", "metadata": {"name": "web"}}`, `apps/web.json: has key "kind" twice in the same object (line 1, column 21); keep only one`},
		{"TooLarge", `{"kind": "Service", "metadata": {"name": "web"}}` + strings.Repeat(" ", MaxSize), `apps/web.json: is 1048624 bytes, over the 1 MiB limit for a unit; keep large data out of the intent repository`},
	}
	for _, tt := range tests {
		u, err := Parse("apps/web.json", []byte(tt.in))
		require.Nil(t, u, tt.name)
		var pe *ParseError
		require.ErrorAs(t, err, &pe, tt.name)
		require.Equal(t, "apps/web.json", pe.Path, tt.name)
		require.Equal(t, tt.want, err.Error(), tt.name)
	}
}

// walkBundle is a copy of a fixture under testdata/walk in a temporary
// directory, which a test may change freely.
type walkBundle struct {
	root string
}

func setupWalk(t *testing.T, fixture string) *walkBundle {
	t.Helper()

	root := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, os.CopyFS(root, os.DirFS(filepath.Join("testdata", "walk", fixture))))
	return &walkBundle{root: root}
}

// write creates the file rel under the bundle's root with its directories.
func (b *walkBundle) write(t *testing.T, rel, content string) {
	t.Helper()

	p := filepath.Join(b.root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func (b *walkBundle) symlink(t *testing.T, target, rel string) {
	t.Helper()

	if err := os.Symlink(target, filepath.Join(b.root, filepath.FromSlash(rel))); err != nil {
		t.Skipf("symlinks are not available: %v", err)
	}
}

func paths(units []*Unit) []string {
	var ps []string
	for _, u := range units {
		ps = append(ps, u.Path)
	}
	return ps
}

func TestWalk(t *testing.T) {
	t.Parallel()

	setup := setupWalk

	t.Run("ReadsUnitsSortedWithForwardSlashRelativePaths", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")

		units, invalid, err := Walk(bundle.root, "")
		require.NoError(t, err)
		// apps.json sorts before apps/…, though the walk meets it after.
		require.Equal(t, []string{"apps.json", "apps/api.json", "apps/web.json", "infra/db/postgres.json"}, paths(units))
		require.Equal(t, []Invalid{{Path: "infra/broken.json", Reason: "is not valid JSON: it ends before the value is complete; check for a missing closing brace, bracket or quote"}}, invalid)

		web := units[2]
		require.Equal(t, IdentityFor("apps/web.json"), web.ID)
		require.Equal(t, "web", web.Name)
		require.Equal(t, map[string]string{"tier": "frontend"}, web.Labels)
		require.Equal(t, uuid.MustParse("5f0c6d8e-2a53-4c1e-9b7a-3d2f1e0c9b8a"), units[1].ID)

		data, err := os.ReadFile(filepath.Join(bundle.root, "apps", "web.json"))
		require.NoError(t, err)
		parsed, err := Parse("apps/web.json", data)
		require.NoError(t, err)
		require.Equal(t, parsed, web, "Walk gives what Parse gives")
	})

	t.Run("SkipsGitAndArchiveDirectoriesAtAnyDepth", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")
		bundle.write(t, ".git/config.json", "not read")
		bundle.write(t, "infra/.git/x.json", "not read")
		bundle.write(t, "infra/db/archive/deep/y.json", "not read")

		units, invalid, err := Walk(bundle.root, "")
		require.NoError(t, err)
		for _, p := range append(paths(units), pathsOf(invalid)...) {
			require.NotContains(t, p, "archive/")
			require.NotContains(t, p, ".git/")
		}
		require.Len(t, units, 4)
		require.Len(t, invalid, 1)
	})

	t.Run("IgnoresFilesThatAreNotJSON", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")
		bundle.write(t, "apps/web.json.bak", "{")
		bundle.write(t, "apps/WEB.JSON", "{")
		require.NoError(t, os.MkdirAll(filepath.Join(bundle.root, "apps", "dir.json"), 0o755))

		units, invalid, err := Walk(bundle.root, "apps")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/api.json", "apps/web.json"}, paths(units))
		require.Empty(t, invalid, "README.md, *.bak, *.JSON and a directory named *.json are not candidates")
	})

	t.Run("ReportsSymlinksWithoutFollowingThem", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")
		outside := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.json"), []byte(`{"kind": "Service", "metadata": {"name": "stolen"}}`), 0o644))

		bundle.symlink(t, "web.json", "apps/alias.json")                   // to a file inside
		bundle.symlink(t, "../infra", "apps/infra")                        // to a directory inside
		bundle.symlink(t, filepath.Join(outside, "secret.json"), "x.json") // absolute, outside
		bundle.symlink(t, outside, "external")                             // to a directory outside
		bundle.symlink(t, "../../../etc", "infra/db/up")                   // relative, outside
		bundle.symlink(t, "../infra/db/up/passwd", "apps/hop.json")        // outside through another link
		bundle.symlink(t, "README.md", "apps/README.link")                 // harmless: ignored
		bundle.symlink(t, "missing.txt", "apps/dangling")                  // harmless: ignored

		units, invalid, err := Walk(bundle.root, "")
		require.NoError(t, err)
		require.Equal(t, []string{"apps.json", "apps/api.json", "apps/web.json", "infra/db/postgres.json"}, paths(units))
		require.Equal(t, []Invalid{
			{Path: "apps/alias.json", Reason: "is a symbolic link; units must be regular files"},
			{Path: "apps/hop.json", Reason: "is a symbolic link that does not resolve inside the repository (path escapes from parent); units must be regular files, and sluice does not follow links"},
			{Path: "apps/infra", Reason: "is a symbolic link to a directory; units must be regular files, and sluice does not follow links"},
			{Path: "external", Reason: "is a symbolic link that resolves outside the repository; units must be regular files, and sluice does not follow links"},
			{Path: "infra/broken.json", Reason: "is not valid JSON: it ends before the value is complete; check for a missing closing brace, bracket or quote"},
			{Path: "infra/db/up", Reason: "is a symbolic link that resolves outside the repository; units must be regular files, and sluice does not follow links"},
			{Path: "x.json", Reason: "is a symbolic link that resolves outside the repository; units must be regular files, and sluice does not follow links"},
		}, invalid)
		for _, u := range units {
			require.NotEqual(t, "stolen", u.Name)
		}
	})

	t.Run("ReportsAFileOverMaxSizeWithoutReadingIt", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")
		// A sparse file far over the limit: reading it whole would show in
		// the time and memory of the test.
		f, err := os.Create(filepath.Join(bundle.root, "apps", "huge.json"))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(8<<30))
		require.NoError(t, f.Close())
		bundle.write(t, "apps/edge.json", `{"kind": "Service", "metadata": {"name": "edge"}}`+strings.Repeat(" ", MaxSize-49))

		units, invalid, err := Walk(bundle.root, "apps")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/api.json", "apps/edge.json", "apps/web.json"}, paths(units))
		require.Equal(t, []Invalid{{Path: "apps/huge.json", Reason: "is 8589934592 bytes, over the 1 MiB limit for a unit; keep large data out of the intent repository"}}, invalid)
	})

	t.Run("ReportsEveryFileOfADuplicateIDAndKeepsNone", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "duplicate-id")

		units, invalid, err := Walk(bundle.root, "")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/other.json"}, paths(units))
		require.Equal(t, []Invalid{
			{Path: "apps/web.json", Reason: "metadata.id 0b3c1f7e-8d4a-4f5b-9c2d-6e7f8a9b0c1d is also used by infra/web-copy.json; give each unit its own id"},
			{Path: "infra/web-copy.json", Reason: "metadata.id 0b3c1f7e-8d4a-4f5b-9c2d-6e7f8a9b0c1d is also used by apps/web.json; give each unit its own id"},
		}, invalid)
	})

	t.Run("PrefixRestrictsTheWalkAndLeavesTheRestUnread", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")
		// Both would be Invalid if the walk read them.
		bundle.symlink(t, "/etc/passwd", "infra/passwd.json")
		bundle.write(t, "apps-other/x.json", "{")

		for _, prefix := range []string{"infra/db", "./infra/db/", "infra//db"} {
			units, invalid, err := Walk(bundle.root, prefix)
			require.NoError(t, err, prefix)
			require.Equal(t, []string{"infra/db/postgres.json"}, paths(units), prefix)
			require.Empty(t, invalid, prefix)
		}

		units, invalid, err := Walk(bundle.root, "apps")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/api.json", "apps/web.json"}, paths(units), "apps-other and apps.json are not under apps/")
		require.Empty(t, invalid)
	})

	t.Run("RefusesAnInvalidPrefix", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")

		_, _, err := Walk(bundle.root, "../tree")
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
	})

	t.Run("RefusesAPrefixThroughASymlink", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")
		bundle.symlink(t, "infra", "linked")

		_, _, err := Walk(bundle.root, "linked/db")
		require.True(t, errs.Is(err, errs.Invalid), "%v", err)
		require.EqualError(t, err, `prefix "linked/db" goes through "linked", a symbolic link, and sluice does not follow links; point the prefix at the real directory`)

		_, _, err = Walk(bundle.root, "apps.json")
		require.EqualError(t, err, `prefix "apps.json" goes through "apps.json", which is not a directory; check the configured prefix`)
	})

	t.Run("FailsWhenRootOrPrefixIsMissing", func(t *testing.T) {
		t.Parallel()

		bundle := setup(t, "tree")

		_, _, err := Walk(filepath.Join(bundle.root, "nope"), "")
		require.ErrorIs(t, err, fs.ErrNotExist)

		// Not an empty result: that would read as "every unit was deleted".
		_, _, err = Walk(bundle.root, "services")
		require.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("FailsWhenADirectoryCannotBeListed", func(t *testing.T) {
		t.Parallel()

		if os.Geteuid() == 0 {
			t.Skip("root lists directories whatever their mode")
		}
		bundle := setup(t, "tree")
		dir := filepath.Join(bundle.root, "infra", "db")
		require.NoError(t, os.Chmod(dir, 0))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })

		// Not Invalid: the units under it would look deleted.
		_, _, err := Walk(bundle.root, "")
		require.ErrorIs(t, err, fs.ErrPermission)
	})

	t.Run("ReportsAFileThatCannotBeRead", func(t *testing.T) {
		t.Parallel()

		if os.Geteuid() == 0 {
			t.Skip("root reads files whatever their mode")
		}
		bundle := setup(t, "tree")
		p := filepath.Join(bundle.root, "apps", "web.json")
		require.NoError(t, os.Chmod(p, 0))

		units, invalid, err := Walk(bundle.root, "apps")
		require.NoError(t, err)
		require.Equal(t, []string{"apps/api.json"}, paths(units))
		require.Equal(t, []Invalid{{Path: "apps/web.json", Reason: "could not be read: permission denied"}}, invalid)
	})
}

func pathsOf(invalid []Invalid) []string {
	var ps []string
	for _, inv := range invalid {
		ps = append(ps, inv.Path)
	}
	return ps
}

func TestCheckDuplicateIDs(t *testing.T) {
	t.Parallel()

	id := uuid.MustParse("0b3c1f7e-8d4a-4f5b-9c2d-6e7f8a9b0c1d")
	mk := func(p string, id uuid.UUID) *Unit { return &Unit{Path: p, ID: id} }

	t.Run("KeepsOrderAndReportsAllSharers", func(t *testing.T) {
		t.Parallel()

		units := []*Unit{
			mk("z.json", IdentityFor("z.json")),
			mk("c.json", id),
			mk("a.json", IdentityFor("a.json")),
			mk("b.json", id),
			mk("d.json", id),
		}
		kept, invalid := CheckDuplicateIDs(units)
		require.Equal(t, []*Unit{units[0], units[2]}, kept)
		require.Equal(t, []Invalid{
			{Path: "b.json", Reason: "metadata.id " + id.String() + " is also used by c.json, d.json; give each unit its own id"},
			{Path: "c.json", Reason: "metadata.id " + id.String() + " is also used by b.json, d.json; give each unit its own id"},
			{Path: "d.json", Reason: "metadata.id " + id.String() + " is also used by b.json, c.json; give each unit its own id"},
		}, invalid)
	})

	t.Run("CatchesADeclaredIDEqualToAnotherFilesDerivedOne", func(t *testing.T) {
		t.Parallel()

		kept, invalid := CheckDuplicateIDs([]*Unit{
			mk("apps/web.json", IdentityFor("apps/web.json")),
			mk("apps/copy.json", IdentityFor("apps/web.json")),
		})
		require.Empty(t, kept)
		require.Equal(t, []Invalid{
			{Path: "apps/copy.json", Reason: "metadata.id " + IdentityFor("apps/web.json").String() + " is also used by apps/web.json; give each unit its own id"},
			{Path: "apps/web.json", Reason: "its identity " + IdentityFor("apps/web.json").String() + ", derived from its path, is also the metadata.id of apps/copy.json; change or remove that id"},
		}, invalid)
	})

	t.Run("NamesAtMostFiveOtherPaths", func(t *testing.T) {
		t.Parallel()

		var units []*Unit
		for i := range 8 {
			units = append(units, mk(fmt.Sprintf("u%d.json", i), id))
		}
		_, invalid := CheckDuplicateIDs(units)
		require.Len(t, invalid, 8)
		require.Equal(t, "metadata.id "+id.String()+" is also used by u1.json, u2.json, u3.json, u4.json, u5.json and 2 more; give each unit its own id", invalid[0].Reason)
	})
}

func TestValidatePrefix(t *testing.T) {
	t.Parallel()

	tests := []struct{ in, want, err string }{
		{"", "", ""},
		{".", "", ""},
		{"./", "", ""},
		{"apps", "apps", ""},
		{"apps/", "apps", ""},
		{"./apps", "apps", ""},
		{"a/b", "a/b", ""},
		{"a//b/./c/", "a/b/c", ""},
		{".github", ".github", ""},
		{"archived", "archived", ""},
		{"/etc", "", `an absolute path cannot be a prefix; give a directory relative to the repository root, such as "apps"`},
		{"../x", "", `a prefix cannot contain ".."; give a directory inside the repository without going up`},
		{"a/../../x", "", `a prefix cannot contain ".."; give a directory inside the repository without going up`},
		{"a/..", "", `a prefix cannot contain ".."; give a directory inside the repository without going up`},
		{"..", "", `a prefix cannot contain ".."; give a directory inside the repository without going up`},
		{`apps\web`, "", "a prefix separates directories with forward slashes, not backslashes"},
		{"apps/archive", "", "sluice never reads units inside a directory named archive, so a prefix cannot go through one"},
		{".git/hooks", "", "sluice never reads units inside a directory named .git, so a prefix cannot go through one"},
	}
	for _, tt := range tests {
		got, err := ValidatePrefix(tt.in)
		if tt.err != "" {
			require.EqualError(t, err, tt.err, "prefix %q", tt.in)
			require.True(t, errs.Is(err, errs.Invalid), "prefix %q", tt.in)
			continue
		}
		require.NoError(t, err, "prefix %q", tt.in)
		require.Equal(t, tt.want, got, "prefix %q", tt.in)
	}
}

func TestInPrefix(t *testing.T) {
	t.Parallel()

	tests := []struct {
		path, prefix string
		want         bool
	}{
		{"apps/web.json", "", true},
		{"web.json", "", true},
		{"apps/web.json", "apps", true},
		{"apps/web.json", "./apps/", true},
		{"apps/deep/web.json", "apps", true},
		{"apps.json", "apps", false},
		{"apps-other/web.json", "apps", false},
		{"apps/web.yaml", "apps", false},
		{"apps/web.JSON", "", false},
		{"apps/archive/web.json", "", false},
		{"archive/web.json", "", false},
		{"apps/.git/web.json", "apps", false},
		{"apps/archive.json", "apps", true},
		{"apps/web.json", "../apps", false},
		{"/apps/web.json", "", false},
		{"apps/../web.json", "", false},
		{"apps/web.json", "apps/web.json", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, InPrefix(tt.path, tt.prefix), "InPrefix(%q, %q)", tt.path, tt.prefix)
	}
}

// writeUnits creates n small unit files in 100 directories under a new
// temporary directory and returns it with their repository-relative paths.
func writeUnits(b *testing.B, n int) (root string, rels []string) {
	b.Helper()

	root = b.TempDir()
	for i := range n {
		rel := fmt.Sprintf("apps/team-%02d/service-%05d.json", i%100, i)
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		content := fmt.Sprintf(`{
  "kind": "Service",
  "metadata": {"name": "service-%05d", "labels": {"team": "team-%02d", "tier": "backend"}},
  "spec": {"image": "registry.example/service:%d", "replicas": %d, "ports": [{"name": "http", "port": 8080}], "env": {"LOG_LEVEL": "info"}}
}
`, i, i%100, i, i%5+1)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		rels = append(rels, rel)
	}
	return root, rels
}

func BenchmarkWalk10k(b *testing.B) {
	b.StopTimer()
	root, _ := writeUnits(b, 10_000)
	b.StartTimer()

	for b.Loop() {
		units, invalid, err := Walk(root, "")
		if err != nil || len(units) != 10_000 || len(invalid) != 0 {
			b.Fatalf("units=%d invalid=%v err=%v", len(units), invalid, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/file")
}

// BenchmarkHash10k is the floor for BenchmarkWalk10k: reading and hashing the
// same files from a known list, with no directory listing and no parsing.
func BenchmarkHash10k(b *testing.B) {
	b.StopTimer()
	root, rels := writeUnits(b, 10_000)
	b.StartTimer()

	for b.Loop() {
		for _, rel := range rels {
			data, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				b.Fatal(err)
			}
			_ = sha256.Sum256(data)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/file")
}

func TestReadFiles(t *testing.T) {
	t.Parallel()

	t.Run("ReadsTheGivenPathsWithWalksRules", func(t *testing.T) {
		t.Parallel()
		bundle := setupWalk(t, "tree")
		outside := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.json"), []byte(`{"kind":"Service","metadata":{"name":"s"}}`), 0o644))
		// A directory link inside the repository and one that leaves it.
		require.NoError(t, os.Symlink("apps", filepath.Join(bundle.root, "alias")))
		require.NoError(t, os.Symlink(outside, filepath.Join(bundle.root, "escape")))
		require.NoError(t, os.Symlink("../apps/web.json", filepath.Join(bundle.root, "infra", "link.json")))
		bundle.write(t, "big.json", `{"kind":"Service","metadata":{"name":"big"},"spec":{"x":"`+strings.Repeat("a", MaxSize)+`"}}`)

		units, invalid, err := ReadFiles(bundle.root, []string{
			"apps/web.json", "infra/broken.json", "alias/web.json", "escape/secret.json",
			"infra/link.json", "big.json", "README.md", "archive/x.json", "../outside.json",
		})
		require.NoError(t, err)
		require.Equal(t, []string{"apps/web.json"}, paths(units))
		require.Equal(t, []string{"../outside.json", "alias/web.json", "big.json", "escape/secret.json", "infra/broken.json", "infra/link.json"}, pathsOf(invalid))
		for _, inv := range invalid {
			require.NotContains(t, inv.Reason, outside, "reasons do not reveal paths outside the repository")
		}
	})

	t.Run("FlagsDuplicateIDsAmongThePaths", func(t *testing.T) {
		t.Parallel()
		bundle := setupWalk(t, "tree")
		id := "5f0c6d8e-2a53-4c1e-9b7a-3d2f1e0c9b8a" // apps/api.json's id
		bundle.write(t, "copy.json", `{"kind":"Service","metadata":{"name":"copy","id":"`+id+`"}}`)

		units, invalid, err := ReadFiles(bundle.root, []string{"apps/api.json", "copy.json"})
		require.NoError(t, err)
		require.Empty(t, units)
		require.Equal(t, []string{"apps/api.json", "copy.json"}, pathsOf(invalid))

		// The same pair, with only one of them asked for, is no duplicate.
		units, invalid, err = ReadFiles(bundle.root, []string{"apps/api.json"})
		require.NoError(t, err)
		require.Equal(t, []string{"apps/api.json"}, paths(units))
		require.Empty(t, invalid)
	})
}

func TestReadFilesIn(t *testing.T) {
	t.Parallel()

	ns := uuid.MustParse("6f1d9c7a-2b3e-4c5d-8e9f-0a1b2c3d4e5f")
	declared := uuid.MustParse("0b3c1f7e-8d4a-4f5b-9c2d-6e7f8a9b0c1d")
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "web.json"), []byte(`{"kind":"Config","metadata":{"name":"web"}}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "api.json"), []byte(`{"kind":"Config","metadata":{"name":"api","id":"`+declared.String()+`"}}`), 0o644))

	units, invalid, err := ReadFilesIn(root, ns, []string{"web.json", "api.json"})
	require.NoError(t, err)
	require.Empty(t, invalid)
	require.Len(t, units, 2)
	require.Equal(t, "api.json", units[0].Path)
	require.Equal(t, declared, units[0].ID, "a declared id is the same in every namespace")
	require.False(t, units[0].DerivedID)
	require.Equal(t, IdentityIn(ns, "web.json"), units[1].ID)
	require.NotEqual(t, IdentityFor("web.json"), units[1].ID)
	require.True(t, units[1].DerivedID)

	units, _, err = ReadFiles(root, []string{"web.json"})
	require.NoError(t, err)
	require.Equal(t, IdentityFor("web.json"), units[0].ID, "ReadFiles keeps the DNS namespace")

	// A declared id equal to another file's derived one is reported as such.
	require.NoError(t, os.WriteFile(filepath.Join(root, "copy.json"),
		[]byte(`{"kind":"Config","metadata":{"name":"copy","id":"`+IdentityIn(ns, "web.json").String()+`"}}`), 0o644))
	_, invalid, err = ReadFilesIn(root, ns, []string{"web.json", "copy.json"})
	require.NoError(t, err)
	require.Len(t, invalid, 2)
	require.Contains(t, invalid[1].Reason, "derived from its path")
}
