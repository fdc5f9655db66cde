package gitops_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/gitops"
	"sluice/internal/gittest"
)

// BenchmarkSync10k syncs a generated repository of 10,000 units four ways,
// each timed from the request to the finished receipt (River's pickup
// included, followers woken by LISTEN/NOTIFY as in serve), beside its floor:
// the git CLI doing the same work in the same loop.
//
//   - FirstSync: clone, parse and insert everything; floor: git clone +
//     hashing every file of the clone.
//   - NoChange: fetch, find nothing; floor: git fetch + git diff --name-only.
//   - OneFileChanged, HundredFilesChanged: fetch, read and update the
//     changed units; floor: git fetch + git diff --name-only + reading and
//     hashing the changed files (one git cat-file --batch).
//
// The ratio (x-floor) is the figure docs/benchmarks.md holds to its goal.
func BenchmarkSync10k(b *testing.B) {
	const units = 10_000
	r := benchRepo(b, units)

	// The floor's own clone, kept up to date like the config root.
	floorDir := filepath.Join(b.TempDir(), "floor")
	benchGit(b, "", "clone", "-q", r.Bare, floorDir)

	b.Run("FirstSync", func(b *testing.B) {
		var sync, floor time.Duration
		for i := 0; i < b.N; i++ {
			bb := setup(b, setupOpts{repo: r, notify: true})
			begin := time.Now()
			res := bb.sync(b, false)
			sync += time.Since(begin)
			require.Equal(b, units, res.Counts.Created)

			b.StopTimer()
			dir := filepath.Join(b.TempDir(), "clone")
			begin = time.Now()
			benchGit(b, "", "clone", "-q", r.Bare, dir)
			n := hashTree(b, dir)
			floor += time.Since(begin)
			require.Equal(b, units, n)
			b.StartTimer()
		}
		reportRatio(b, sync, floor, "git clone + hash every file")
	})

	b.Run("NoChange", func(b *testing.B) {
		bb := setup(b, setupOpts{repo: r, notify: true})
		bb.sync(b, false)
		var sync, floor time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			begin := time.Now()
			res := bb.sync(b, false)
			sync += time.Since(begin)
			require.Empty(b, res.Updated)
			require.Equal(b, units, res.Unchanged)

			b.StopTimer()
			begin = time.Now()
			old := strings.TrimSpace(benchGit(b, floorDir, "rev-parse", "HEAD"))
			benchGit(b, floorDir, "fetch", "-q", "origin")
			benchGit(b, floorDir, "diff", "--name-only", old, "origin/main")
			floor += time.Since(begin)
			b.StartTimer()
		}
		reportRatio(b, sync, floor, "git fetch + diff --name-only")
	})

	gen := 0 // edits so far, across the runs the benchmark framework makes
	changed := func(b *testing.B, files int) {
		bb := setup(b, setupOpts{repo: r, notify: true})
		bb.sync(b, false)
		benchGit(b, floorDir, "fetch", "-q", "origin")
		benchGit(b, floorDir, "reset", "-q", "--hard", "origin/main")
		var sync, floor time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			edits := make(map[string]string, files)
			var paths []string
			for range files {
				n := (gen * 7919) % units
				gen++
				path := fmt.Sprintf("apps/%02d/svc-%05d.json", n%100, n)
				edits[path] = benchUnit(n, fmt.Sprintf("v%d", gen))
				paths = append(paths, path)
			}
			sort.Strings(paths)
			r.Commit(b, "change", edits)
			b.StartTimer()

			begin := time.Now()
			res := bb.sync(b, false)
			sync += time.Since(begin)
			require.Equal(b, files, res.Counts.Updated)
			require.Equal(b, paths[:min(files, gitops.SampleSize)], res.Updated)

			b.StopTimer()
			begin = time.Now()
			old := strings.TrimSpace(benchGit(b, floorDir, "rev-parse", "HEAD"))
			benchGit(b, floorDir, "fetch", "-q", "origin")
			diff := strings.Fields(benchGit(b, floorDir, "diff", "--name-only", old, "origin/main"))
			hashBlobs(b, floorDir, diff)
			floor += time.Since(begin)
			require.Equal(b, paths, diff)
			benchGit(b, floorDir, "reset", "-q", "--hard", "origin/main")
			b.StartTimer()
		}
		reportRatio(b, sync, floor, "git fetch + diff --name-only + hash changed")
	}
	b.Run("OneFileChanged", func(b *testing.B) { changed(b, 1) })
	b.Run("HundredFilesChanged", func(b *testing.B) { changed(b, 100) })
}

// hashBlobs reads the files at origin/main with one git cat-file --batch
// and hashes each.
func hashBlobs(b *testing.B, dir string, paths []string) {
	b.Helper()
	var in strings.Builder
	for _, p := range paths {
		in.WriteString("origin/main:" + p + "\n")
	}
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	require.NoError(b, err)
	for len(out) > 0 {
		header, rest, ok := bytes.Cut(out, []byte("\n"))
		require.True(b, ok)
		fields := strings.Fields(string(header))
		require.Len(b, fields, 3, "cat-file: %s", header)
		size, err := strconv.Atoi(fields[2])
		require.NoError(b, err)
		_ = sha256.Sum256(rest[:size])
		out = rest[size+1:]
	}
}

func reportRatio(b *testing.B, sync, floor time.Duration, floorName string) {
	n := float64(b.N)
	b.ReportMetric(float64(sync.Microseconds())/n/1000, "ms/sync")
	b.ReportMetric(float64(floor.Microseconds())/n/1000, "ms/floor")
	b.ReportMetric(float64(sync)/float64(floor), "x-floor")
	b.Logf("sync %.1f ms, floor (%s) %.1f ms, ratio %.2f", float64(sync.Microseconds())/n/1000, floorName,
		float64(floor.Microseconds())/n/1000, float64(sync)/float64(floor))
}

func benchUnit(i int, image string) string {
	return fmt.Sprintf(`{"kind":"Config","metadata":{"name":"svc-%05d"},"spec":{"image":%q,"args":["--port","%d"]}}`, i, image, 10000+i)
}

// benchRepo pushes a repository of n units under apps/NN/.
func benchRepo(b *testing.B, n int) *gittest.Repo {
	b.Helper()
	r := gittest.New(b)
	for i := 0; i < n; i++ {
		full := filepath.Join(r.Pusher, "apps", fmt.Sprintf("%02d", i%100), fmt.Sprintf("svc-%05d.json", i))
		require.NoError(b, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(b, os.WriteFile(full, []byte(benchUnit(i, "sha256:0")), 0o644))
	}
	r.Commit(b, "10k units", nil)
	return r
}

func hashTree(b *testing.B, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_ = sha256.Sum256(data)
		n++
		return nil
	})
	require.NoError(b, err)
	return n
}

func benchGit(b *testing.B, dir string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(b, err, "git %v", args)
	return string(out)
}
