package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
)

func TestArtifactCLI(t *testing.T) {
	t.Parallel()

	t.Run("SizesAreHumanReadable", func(t *testing.T) {
		for n, want := range map[int64]string{
			0: "0 B", 999: "999 B", 1000: "1.0 kB", 2500: "2.5 kB", 9949: "9.9 kB", 9950: "10 kB",
			999_499: "999 kB", 999_950: "1.0 MB", 8_800_000: "8.8 MB", 120_000_000: "120 MB", 3_000_000_000: "3.0 GB",
		} {
			require.Equal(t, want, humanBytes(n), n)
		}
	})

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_DATA_DIR="+t.TempDir())
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return p.cli(nil, testToken, append([]string{"artifact"}, args...)...)
	}
	// rows is a table's digests and sizes, header checked.
	rows := func(t *testing.T, stdout string) (digests, sizes []string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Equal(t, []string{"DIGEST", "SIZE", "STORED"}, strings.Fields(lines[0]), stdout)
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			require.Len(t, f, 5, "digest, size and unit, date and time: %q", l)
			_, err := time.ParseInLocation("2006-01-02 15:04:05", f[3]+" "+f[4], time.Local)
			require.NoError(t, err, l)
			digests, sizes = append(digests, f[0]), append(sizes, f[1]+" "+f[2])
		}
		return digests, sizes
	}

	t.Run("AnEmptyStoreSaysHowToFillIt", func(t *testing.T) {
		stdout, stderr, code := cli("list")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "No artifact is stored; `sluice artifact push FILE` stores one.")
		stdout, stderr, code = cli("list", "--json")
		require.Equal(t, 0, code, stderr)
		require.JSONEq(t, "[]", stdout)
	})

	// Three files, pushed in order: the list shows the last one first.
	dir := t.TempDir()
	var pushed []string // newest first
	for i, size := range []int{10, 2500, 1_200_000} {
		content := bytes.Repeat([]byte{byte('a' + i)}, size)
		file := filepath.Join(dir, "file"+string(rune('a'+i)))
		require.NoError(t, os.WriteFile(file, content, 0o644))
		sum := sha256.Sum256(content)
		digest, stderr, code := cli("push", file)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), strings.TrimSpace(digest))
		pushed = append([]string{strings.TrimSpace(digest)}, pushed...)
	}
	wantSizes := []string{"1.2 MB", "2.5 kB", "10 B"}

	t.Run("ListShowsThemNewestFirst", func(t *testing.T) {
		stdout, stderr, code := cli("list")
		require.Equal(t, 0, code, stderr)
		require.Empty(t, stderr, "one page holds them all: no hint")
		digests, sizes := rows(t, stdout)
		require.Equal(t, pushed, digests)
		require.Equal(t, wantSizes, sizes)
	})

	t.Run("ALimitShowsOnePageAndSaysThereIsMore", func(t *testing.T) {
		stdout, stderr, code := cli("list", "--limit", "2")
		require.Equal(t, 0, code, stderr)
		digests, _ := rows(t, stdout)
		require.Equal(t, pushed[:2], digests)
		require.Contains(t, stderr, "The newest 2 shown; more are stored: `sluice artifact list --all` lists every one.")
		require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)

		// The hint is on stderr, so that the JSON on stdout still parses.
		stdout, stderr, code = cli("list", "--limit", "2", "--json")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stderr, "--all")
		var page []map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &page), stdout)
		require.Len(t, page, 2)
	})

	t.Run("AllFollowsEveryPageOnce", func(t *testing.T) {
		for _, args := range [][]string{{"--all", "--limit", "2"}, {"--limit", "1", "--all"}, {"--all"}} {
			stdout, stderr, code := cli(append([]string{"list"}, args...)...)
			require.Equal(t, 0, code, stderr)
			require.Empty(t, stderr, args)
			digests, sizes := rows(t, stdout)
			require.Equal(t, pushed, digests, args)
			require.Equal(t, wantSizes, sizes, args)
		}
	})

	t.Run("JSONParses", func(t *testing.T) {
		for _, args := range [][]string{{"--json"}, {"--output", "json"}, {"-o", "json", "--all", "--limit", "2"}} {
			stdout, stderr, code := cli(append([]string{"list"}, args...)...)
			require.Equal(t, 0, code, stderr)
			var list []struct {
				Digest    string    `json:"digest"`
				Size      int64     `json:"size"`
				CreatedAt time.Time `json:"createdAt"`
			}
			require.NoError(t, json.Unmarshal([]byte(stdout), &list), stdout)
			require.Len(t, list, 3, args)
			for i, a := range list {
				require.Equal(t, pushed[i], a.Digest, args)
				require.False(t, a.CreatedAt.IsZero())
				if i > 0 {
					require.False(t, a.CreatedAt.After(list[i-1].CreatedAt), "newest first")
				}
			}
			require.Equal(t, []int64{1_200_000, 2500, 10}, []int64{list[0].Size, list[1].Size, list[2].Size})
		}
	})

	t.Run("AViewerMayList", func(t *testing.T) {
		viewer, stderr, code := p.cli(nil, testToken, "token", "create", "--role", "viewer", "--name", "artifact-reader")
		require.Equal(t, 0, code, stderr)
		stdout, stderr, code := p.cli(nil, strings.TrimSpace(viewer), "artifact", "list")
		require.Equal(t, 0, code, stderr)
		digests, _ := rows(t, stdout)
		require.Equal(t, pushed, digests)
	})

	t.Run("BadInputExitsTwo", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"list", "--limit", "0"}, "--limit is 1 to 500, not 0."},
			{[]string{"list", "--limit", "501"}, "--limit is 1 to 500, not 501."},
			{[]string{"list", "extra"}, "sluice artifact list: takes no arguments"},
			{[]string{"list", "--bogus"}, "flag provided but not defined: -bogus"},
			{nil, "sluice artifact list [--limit N] [--all] [--json]"},
			{[]string{"push"}, "sluice artifact push FILE"},
			{[]string{"get", "sha256:" + strings.Repeat("0", 64), "extra"}, "sluice artifact get DIGEST > FILE"},
		} {
			stdout, stderr, code := cli(tc.args...)
			require.Equal(t, 2, code, "%v: %s%s", tc.args, stdout, stderr)
			require.Contains(t, stderr, tc.want, tc.args)
		}
		_, stderr, code := cli("list", "-h")
		require.Equal(t, 0, code)
		require.Contains(t, stderr, "-all")
		_, stderr, code = cli("frobnicate")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "use list, push or get")
	})
}
