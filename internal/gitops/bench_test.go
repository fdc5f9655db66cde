package gitops_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/gitops"
	"sluice/internal/gittest"
	"sluice/internal/journal"
)

// BenchmarkSync10k syncs a generated repository of 10,000 units four ways,
// each timed from the request to the finished receipt (River's pickup
// included, with serve's fetch settings, and followers woken by
// LISTEN/NOTIFY as in serve), beside its floor:
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
// Beside it, each scenario reports the median of each stage of the sync
// (ms/fetch, ms/diff, ms/walk, ms/admit, ms/write, ms/finish), as the
// receipts' phases time them: whole milliseconds, so a stage under one
// reads 0.
func BenchmarkSync10k(b *testing.B) {
	const units = 10_000
	r := benchRepo(b, units)

	// The floor's own clone, kept up to date like the config root.
	floorDir := filepath.Join(b.TempDir(), "floor")
	benchGit(b, "", "clone", "-q", r.Bare, floorDir)

	b.Run("FirstSync", func(b *testing.B) {
		var sync, floor samples
		var stages stageSamples
		for i := 0; i < b.N; i++ {
			bb := setup(b, setupOpts{repo: r, likeServe: true})
			begin := time.Now()
			res := bb.sync(b, false)
			sync.add(begin)
			stages.add(res.Phases)
			require.Equal(b, units, res.Counts.Created)

			b.StopTimer()
			dir := filepath.Join(b.TempDir(), "clone")
			begin = time.Now()
			benchGit(b, "", "clone", "-q", r.Bare, dir)
			n := hashTree(b, dir)
			floor.add(begin)
			require.Equal(b, units, n)
			b.StartTimer()
		}
		reportRatio(b, sync, floor, "git clone + hash every file")
		stages.report(b)
	})

	b.Run("NoChange", func(b *testing.B) {
		bb := setup(b, setupOpts{repo: r, likeServe: true})
		bb.sync(b, false)
		bb.settleDB(b)
		printEnvOnce.Do(func() { bb.printEnv(b, r.Bare) })
		var sync, floor samples
		var stages stageSamples
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			settle()
			b.StartTimer()
			begin := time.Now()
			res := bb.sync(b, false)
			sync.add(begin)
			stages.add(res.Phases)
			require.Empty(b, res.Updated)
			require.Equal(b, units, res.Unchanged)

			b.StopTimer()
			settle()
			begin = time.Now()
			old := strings.TrimSpace(benchGit(b, floorDir, "rev-parse", "HEAD"))
			benchGit(b, floorDir, "fetch", "-q", "origin")
			benchGit(b, floorDir, "diff", "--name-only", old, "origin/main")
			floor.add(begin)
			b.StartTimer()
		}
		reportRatio(b, sync, floor, "git fetch + diff --name-only")
		stages.report(b)
	})

	gen := 0 // edits so far, across the runs the benchmark framework makes
	changed := func(b *testing.B, files int) {
		bb := setup(b, setupOpts{repo: r, likeServe: true})
		bb.sync(b, false)
		bb.settleDB(b)
		benchGit(b, floorDir, "fetch", "-q", "origin")
		benchGit(b, floorDir, "reset", "-q", "--hard", "origin/main")
		var sync, floor samples
		var stages stageSamples
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
			settle()
			b.StartTimer()

			begin := time.Now()
			res := bb.sync(b, false)
			sync.add(begin)
			stages.add(res.Phases)
			require.Equal(b, files, res.Counts.Updated)
			require.Equal(b, paths[:min(files, gitops.SampleSize)], res.Updated)

			b.StopTimer()
			settle()
			begin = time.Now()
			old := strings.TrimSpace(benchGit(b, floorDir, "rev-parse", "HEAD"))
			benchGit(b, floorDir, "fetch", "-q", "origin")
			diff := strings.Fields(benchGit(b, floorDir, "diff", "--name-only", old, "origin/main"))
			hashBlobs(b, floorDir, diff)
			floor.add(begin)
			require.Equal(b, paths, diff)
			benchGit(b, floorDir, "reset", "-q", "--hard", "origin/main")
			b.StartTimer()
		}
		reportRatio(b, sync, floor, "git fetch + diff --name-only + hash changed")
		stages.report(b)
	}
	b.Run("OneFileChanged", func(b *testing.B) { changed(b, 1) })
	b.Run("HundredFilesChanged", func(b *testing.B) { changed(b, 100) })
}

// settle pauses between the timed parts of a loop, the timer stopped, so
// that a sync and its floor each start on a machine that has finished the
// other's work (the processes git leaves, River's and PostgreSQL's own
// writes).
func settle() { time.Sleep(50 * time.Millisecond) }

// settleDB does what PostgreSQL and the kernel would do on their own in the
// minute after a first sync of 10,000 units (autovacuum's analyze and
// vacuum of the new rows, a checkpoint, the write-back of the files the
// clones wrote), so that the syncs timed next do not run beside it.
func (bb *testBundle) settleDB(b *testing.B) {
	b.Helper()
	bb.exec(b, "VACUUM (ANALYZE)")
	bb.exec(b, "CHECKPOINT")
	syscall.Sync()
}

var printEnvOnce sync.Once

// printEnv prints one line, for scripts/bench-doc.sh, of what the figures
// depend on beyond the machine: the PostgreSQL server and its settings, and
// the file system the repositories are on.
func (bb *testBundle) printEnv(b *testing.B, dir string) {
	b.Helper()
	var version, settings string
	require.NoError(b, bb.pool.QueryRow(bb.ctx, `SELECT current_setting('server_version'),
		string_agg(name || '=' || setting || coalesce(unit, ''), ' ' ORDER BY name) FROM pg_settings
		WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'work_mem', 'max_connections')`).Scan(&version, &settings))
	fsType := "unknown"
	if out, err := exec.Command("df", "-PT", dir).Output(); err == nil {
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) == 2 {
			if f := strings.Fields(lines[1]); len(f) > 1 {
				fsType = f[1]
			}
		}
	}
	fmt.Printf("bench-env: postgres %s (%s); repositories on %s\n", version, settings, fsType)
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

// samples are the durations of one timed part of a loop, one per iteration.
type samples []time.Duration

func (s *samples) add(begin time.Time) { *s = append(*s, time.Since(begin)) }

// median is the middle sample (the mean of the two middle ones for an even
// count): one sync slowed by the machine's other work does not move it.
func (s samples) median() time.Duration {
	v := slices.Clone(s)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// reportRatio reports the medians of sync and floor over the iterations and
// their ratio.
func reportRatio(b *testing.B, sync, floor samples, floorName string) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	sm, fm := sync.median(), floor.median()
	b.ReportMetric(ms(sm), "ms/sync")
	b.ReportMetric(ms(fm), "ms/floor")
	b.ReportMetric(float64(sm)/float64(fm), "x-floor")
	b.Logf("medians of %d: sync %.1f ms, floor (%s) %.1f ms, ratio %.2f", len(sync), ms(sm), floorName, ms(fm), float64(sm)/float64(fm))
}

// stageSamples are the durations of a sync's stages, one per iteration of
// each, as its receipt's phases time them.
type stageSamples struct {
	order []string // the stages, as the receipts name them
	ms    map[string][]int64
}

func (s *stageSamples) add(phases journal.Phases) {
	if s.ms == nil {
		s.ms = map[string][]int64{}
	}
	for _, p := range phases {
		if _, ok := s.ms[p.Name]; !ok {
			s.order = append(s.order, p.Name)
		}
		s.ms[p.Name] = append(s.ms[p.Name], p.Ms)
	}
}

// report reports the median of each stage over the iterations, as
// ms/<stage>, and logs them in one line.
func (s *stageSamples) report(b *testing.B) {
	require.NotEmpty(b, s.order, "the receipts time no stage")
	var line strings.Builder
	for _, name := range s.order {
		v := slices.Clone(s.ms[name])
		slices.Sort(v)
		med := float64(v[len(v)/2])
		if n := len(v); n%2 == 0 {
			med = float64(v[n/2-1]+v[n/2]) / 2
		}
		b.ReportMetric(med, "ms/"+name)
		fmt.Fprintf(&line, " %s %.1f ms,", name, med)
	}
	b.Logf("stage medians of %d:%s", len(s.ms[s.order[0]]), strings.TrimSuffix(line.String(), ","))
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
