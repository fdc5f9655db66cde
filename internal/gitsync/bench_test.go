package gitsync

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/redact"
)

const benchFiles = 10_000

// benchUnit is the content of unit n at a given image generation.
func benchUnit(n, gen int) string {
	return fmt.Sprintf(`{"kind":"Service","metadata":{"name":"svc-%d"},"spec":{"image":"sha256:%064x"}}`+"\n", n, n*1_000_003+gen)
}

func benchPath(n int) string { return fmt.Sprintf("apps/%02d/svc-%d.json", n%100, n) }

// fastImport commits files (path → content) on main of the bare repository
// bare with git fast-import, far quicker than writing and adding them, and
// returns the new commit.
func fastImport(tb testing.TB, bare string, files map[string]string, msg string, parent bool) string {
	tb.Helper()
	var in strings.Builder
	fmt.Fprintf(&in, "commit refs/heads/main\ncommitter Bench <bench@example.com> %d +0000\ndata %d\n%s\n", time.Now().Unix(), len(msg), msg)
	if parent {
		in.WriteString("from refs/heads/main^0\n")
	}
	for p, content := range files {
		fmt.Fprintf(&in, "M 100644 inline %s\ndata %d\n%s\n", p, len(content), content)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = bare
	cmd.Env = gitEnv
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, string(out))
	return gitCmd(tb, bare, "rev-parse", "refs/heads/main")
}

// BenchmarkSync10k measures Sync on a repository of 10,000 small units
// against the git CLI doing the same step: a clone, a fetch that finds
// nothing, fetches of a one-file and a 100-file change, and UpToDate (the
// proof a converge pays when the remote has not moved) beside git ls-remote. The default ns/op is Sync's;
// sluice-ns/op repeats it beside git-ns/op (git clone, or git fetch + git diff
// --name-only old new) and x-git, their ratio. git+reset-ns/op adds the
// git reset --hard that brings the CLI's working tree to the fetched commit,
// which Sync also does.
func BenchmarkSync10k(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	bare := filepath.Join(root, "intent.git")
	gitCmd(b, root, "init", "-q", "--bare", bare)
	files := make(map[string]string, benchFiles)
	for n := range benchFiles {
		files[benchPath(n)] = benchUnit(n, 0)
	}
	begin := time.Now()
	fastImport(b, bare, files, "10k units", false)
	gitCmd(b, bare, "repack", "-adq")
	b.Logf("generated %d files in %s", benchFiles, time.Since(begin).Round(time.Millisecond))
	remote := Remote{URL: "file://" + bare}

	report := func(b *testing.B, ours, cli, cliReset time.Duration) {
		n := float64(b.N)
		b.ReportMetric(float64(ours.Nanoseconds())/n, "sluice-ns/op")
		b.ReportMetric(float64(cli.Nanoseconds())/n, "git-ns/op")
		b.ReportMetric(float64(ours)/float64(cli), "x-git")
		if cliReset > 0 {
			b.ReportMetric(float64((cli+cliReset).Nanoseconds())/n, "git+reset-ns/op")
			b.ReportMetric(float64(ours)/float64(cli+cliReset), "x-git+reset")
		}
	}
	timed := func(f func()) time.Duration {
		t0 := time.Now()
		f()
		return time.Since(t0)
	}

	b.Run("Clone", func(b *testing.B) {
		var ours, cli time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := filepath.Join(b.TempDir(), "config-root")
			m, err := New(Opts{Dir: dir, Remote: remote, Redactor: &redact.Redactor{}})
			require.NoError(b, err)
			b.StartTimer()
			ours += timed(func() {
				_, err = m.Sync(ctx, "")
			})
			b.StopTimer()
			require.NoError(b, err)
			cli += timed(func() { gitCmd(b, root, "clone", "-q", remote.URL, filepath.Join(b.TempDir(), "cli")) })
			b.StartTimer()
		}
		report(b, ours, cli, 0)
	})

	// The steady state, a synced Mirror and a CLI clone at the remote's
	// head, is made once and shared: the framework runs each sub-benchmark
	// twice (b.N = 1, then 3), and a 10k-file checkout costs seconds.
	var (
		m      *Mirror
		cliDir string
		head   string // the commit both hold
	)
	steady := func(b *testing.B) {
		b.Helper()
		if m != nil {
			return
		}
		var err error
		m, err = New(Opts{Dir: filepath.Join(root, "steady"), Remote: remote, Redactor: &redact.Redactor{}})
		require.NoError(b, err)
		res, err := m.Sync(ctx, "")
		require.NoError(b, err)
		cliDir, head = filepath.Join(root, "steady-cli"), res.Commit
		gitCmd(b, root, "clone", "-q", remote.URL, cliDir)
	}

	b.Run("NoChange", func(b *testing.B) {
		b.StopTimer()
		steady(b)
		var ours, cli, cliReset time.Duration
		b.StartTimer()
		for i := 0; i < b.N; i++ {
			var res *Result
			var err error
			ours += timed(func() { res, err = m.Sync(ctx, head) })
			b.StopTimer()
			require.NoError(b, err)
			require.Empty(b, res.Changed)
			cli += timed(func() {
				gitCmd(b, cliDir, "fetch", "-q", "origin")
				gitCmd(b, cliDir, "diff", "--name-only", head, "origin/main")
			})
			cliReset += timed(func() { gitCmd(b, cliDir, "reset", "-q", "--hard", "origin/main") })
			b.StartTimer()
		}
		report(b, ours, cli, cliReset)
	})

	// What a converge pays when the remote has not moved: UpToDate reads
	// the working tree's refs and lists the remote's, beside git ls-remote.
	b.Run("UpToDate", func(b *testing.B) {
		b.StopTimer()
		steady(b)
		var ours, cli time.Duration
		for i := 0; i < b.N; i++ {
			var ok bool
			var err error
			b.StartTimer()
			ours += timed(func() { ok, err = m.UpToDate(ctx, head) })
			b.StopTimer()
			require.NoError(b, err)
			require.True(b, ok)
			cli += timed(func() { gitCmd(b, cliDir, "ls-remote", "origin", "refs/heads/main") })
		}
		report(b, ours, cli, 0)
	})

	gen := 0 // image generations, across the runs the benchmark framework makes
	changed := func(b *testing.B, files int) {
		b.StopTimer()
		steady(b)
		var ours, cli, cliReset time.Duration
		for i := 0; i < b.N; i++ {
			edits := make(map[string]string, files)
			want := make([]Change, 0, files)
			for range files {
				gen++
				n := (gen * 7919) % benchFiles
				edits[benchPath(n)] = benchUnit(n, gen)
				want = append(want, Change{Path: benchPath(n)})
			}
			slices.SortFunc(want, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
			next := fastImport(b, bare, edits, fmt.Sprintf("bump %d units", files), true)
			var res *Result
			var err error
			b.StartTimer()
			ours += timed(func() { res, err = m.Sync(ctx, head) })
			b.StopTimer()
			require.NoError(b, err)
			require.Equal(b, next, res.Commit)
			require.Equal(b, want, res.Changed)
			var diff string
			cli += timed(func() {
				gitCmd(b, cliDir, "fetch", "-q", "origin")
				diff = gitCmd(b, cliDir, "diff", "--name-only", head, "origin/main")
			})
			require.Len(b, strings.Fields(diff), files)
			cliReset += timed(func() { gitCmd(b, cliDir, "reset", "-q", "--hard", "origin/main") })
			head = next
		}
		report(b, ours, cli, cliReset)
	}
	b.Run("OneChange", func(b *testing.B) { changed(b, 1) })
	b.Run("HundredChanges", func(b *testing.B) { changed(b, 100) })
}

// BenchmarkSyncPiledPacks measures what piled packs cost a sync of 100
// changed files, and what Repack gives back: a Mirror of the 10,000-file
// repository syncs 40 such commits (a pack each), then each sub-benchmark
// times the next syncs: Piled with the 41 packs and one more a sync, and
// Repacked after one Repack. The remote is repacked after every commit, so
// that only the Mirror's packs differ. repack-ms is the Repack's duration.
func BenchmarkSyncPiledPacks(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	bare := filepath.Join(root, "intent.git")
	gitCmd(b, root, "init", "-q", "--bare", bare)
	files := make(map[string]string, benchFiles)
	for n := range benchFiles {
		files[benchPath(n)] = benchUnit(n, 0)
	}
	fastImport(b, bare, files, "10k units", false)
	gitCmd(b, bare, "repack", "-adq")
	gen := 0
	// pile makes a Mirror that has synced 40 commits of 100 changes since
	// its clone.
	pile := func(b *testing.B) (*Mirror, string) {
		b.Helper()
		m, err := New(Opts{Dir: filepath.Join(b.TempDir(), "config-root"), Remote: Remote{URL: "file://" + bare}, Redactor: &redact.Redactor{}})
		require.NoError(b, err)
		res, err := m.Sync(ctx, "")
		require.NoError(b, err)
		head := res.Commit
		for range 40 {
			head, _, _ = bump(b, m, bare, head, &gen)
		}
		return m, head
	}
	for _, repack := range []bool{false, true} {
		name := "Piled"
		if repack {
			name = "Repacked"
		}
		b.Run(name, func(b *testing.B) {
			b.StopTimer()
			m, head := pile(b)
			var repackTook time.Duration
			if repack {
				rr, err := m.Repack(ctx, 2)
				require.NoError(b, err)
				require.Equal(b, 41, rr.Packs)
				repackTook = rr.Took
			}
			b.ResetTimer() // the pile's syncs ran with it on
			var took, cpu time.Duration
			for i := 0; i < b.N; i++ {
				var d, c time.Duration
				head, d, c = bump(b, m, bare, head, &gen)
				took, cpu = took+d, cpu+c
			}
			b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "ms/sync")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/sync")
			if repack {
				b.ReportMetric(float64(repackTook.Milliseconds()), "repack-ms")
			}
		})
	}
}

// bump commits 100 changed files to bare, repacks it, and syncs m from
// head to the new commit, reading the changed files; it returns the commit,
// how long the sync took and the CPU time this process spent on it (which
// a busy machine moves less than the wall time). Only the sync runs with
// the timer on.
func bump(b *testing.B, m *Mirror, bare, head string, gen *int) (string, time.Duration, time.Duration) {
	b.Helper()
	edits := make(map[string]string, 100)
	for range 100 {
		*gen++
		n := (*gen * 7919) % benchFiles
		edits[benchPath(n)] = benchUnit(n, *gen)
	}
	next := fastImport(b, bare, edits, "bump 100 units", true)
	gitCmd(b, bare, "repack", "-adq")
	b.StartTimer()
	begin, cpu := time.Now(), cpuTime(b)
	res, err := m.SyncFiles(context.Background(), SyncOpts{Since: head, Read: func(string) bool { return true }})
	took, cpu := time.Since(begin), cpuTime(b)-cpu
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, next, res.Commit)
	require.Len(b, res.Files, 100)
	return next, took, cpu
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
