package gitops_test

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sluice/internal/gittest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkSync10k syncs a generated repository of 10,000 units three ways,
// each timed from the request to the finished receipt (River's pickup
// included), beside its floor done with the git CLI:
//
//   - FirstSync: clone, walk and insert everything; floor: hash every file of
//     a checkout.
//   - NoChange: fetch, find nothing; floor: git fetch + git diff --name-only.
//   - OneFileChanged: fetch, read and update one unit; floor: git fetch +
//     git diff --name-only + hashing the changed file.
func BenchmarkSync10k(b *testing.B) {
	const units = 10_000
	r := benchRepo(b, units)

	// The floor's own clone, kept up to date like the config root.
	floorDir := filepath.Join(b.TempDir(), "floor")
	benchGit(b, "", "clone", "-q", r.Bare, floorDir)

	b.Run("FirstSync", func(b *testing.B) {
		var sync, floor, clone time.Duration
		for i := 0; i < b.N; i++ {
			// For context, not the floor: git clone alone (this machine
			// creates files slowly, and the first sync must write them too).
			b.StopTimer()
			begin := time.Now()
			benchGit(b, "", "clone", "-q", r.Bare, filepath.Join(b.TempDir(), "clone"))
			clone += time.Since(begin)
			b.StartTimer()

			bb := setup(b, setupOpts{repo: r})
			begin = time.Now()
			res := bb.sync(b, false)
			sync += time.Since(begin)
			require.Equal(b, units, res.Counts.Created)

			begin = time.Now()
			n := hashTree(b, floorDir)
			floor += time.Since(begin)
			require.Equal(b, units, n)
		}
		reportRatio(b, sync, floor, "hash every file")
		b.ReportMetric(float64(clone.Microseconds())/float64(b.N)/1000, "ms/git-clone")
		b.Logf("for context: git clone alone %.0f ms", float64(clone.Microseconds())/float64(b.N)/1000)
	})

	b.Run("NoChange", func(b *testing.B) {
		bb := setup(b, setupOpts{repo: r})
		bb.sync(b, false)
		var sync, floor time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			begin := time.Now()
			res := bb.sync(b, false)
			sync += time.Since(begin)
			require.Empty(b, res.Updated)
			require.Equal(b, units, res.Unchanged)

			begin = time.Now()
			old := strings.TrimSpace(benchGit(b, floorDir, "rev-parse", "HEAD"))
			benchGit(b, floorDir, "fetch", "-q", "origin")
			benchGit(b, floorDir, "diff", "--name-only", old, "origin/main")
			floor += time.Since(begin)
		}
		reportRatio(b, sync, floor, "git fetch + diff --name-only")
	})

	b.Run("OneFileChanged", func(b *testing.B) {
		bb := setup(b, setupOpts{repo: r})
		bb.sync(b, false)
		benchGit(b, floorDir, "fetch", "-q", "origin")
		benchGit(b, floorDir, "reset", "-q", "--hard", "origin/main")
		var sync, floor time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			path := fmt.Sprintf("apps/%02d/svc-%05d.json", i%100, i)
			r.Commit(b, "change", map[string]string{path: benchUnit(i, fmt.Sprintf("v%d", time.Now().UnixNano()))})
			b.StartTimer()

			begin := time.Now()
			res := bb.sync(b, false)
			sync += time.Since(begin)
			require.Equal(b, []string{path}, res.Updated)

			begin = time.Now()
			old := strings.TrimSpace(benchGit(b, floorDir, "rev-parse", "HEAD"))
			benchGit(b, floorDir, "fetch", "-q", "origin")
			changed := strings.Fields(benchGit(b, floorDir, "diff", "--name-only", old, "origin/main"))
			for _, p := range changed {
				data, err := exec.Command("git", "-C", floorDir, "show", "origin/main:"+p).Output()
				require.NoError(b, err)
				_ = sha256.Sum256(data)
			}
			floor += time.Since(begin)
			b.StopTimer()
			benchGit(b, floorDir, "reset", "-q", "--hard", "origin/main")
			b.StartTimer()
		}
		reportRatio(b, sync, floor, "git fetch + diff --name-only + hash changed")
	})
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
