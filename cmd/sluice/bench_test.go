package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/pglocal"
)

// The figures the foundation asks for, each beside its floor: serve's start
// to ready against starting its embedded PostgreSQL alone, which serve
// cannot beat; and the idle RSS of serve itself (PostgreSQL excluded).

func benchDir(b *testing.B) string {
	b.Helper()
	root := b.TempDir()
	require.NoError(b, os.Chmod(filepath.Dir(root), 0o755))
	require.NoError(b, os.Chmod(root, 0o755))
	return root
}

func BenchmarkStartToReady(b *testing.B) {
	b.Run("FirstStart", func(b *testing.B) {
		var ready, floor time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			root := benchDir(b)
			begin := time.Now()
			c, err := pglocal.Start(context.Background(), pglocal.Opts{Dir: filepath.Join(root, "floor")})
			require.NoError(b, err)
			floor += time.Since(begin)
			require.NoError(b, c.Stop(context.Background()))
			b.StartTimer()

			p, took := startServe(b, "SLUICE_DATA_DIR="+filepath.Join(root, "data"))
			ready += took
			b.StopTimer()
			p.stop(b)
			b.StartTimer()
		}
		report(b, ready, floor, "initdb+start")
	})

	b.Run("Restart", func(b *testing.B) {
		root := benchDir(b)
		data := "SLUICE_DATA_DIR=" + filepath.Join(root, "data")
		p, _ := startServe(b, data)
		p.stop(b)
		c, err := pglocal.Start(context.Background(), pglocal.Opts{Dir: filepath.Join(root, "floor")})
		require.NoError(b, err)
		require.NoError(b, c.Stop(context.Background()))

		var ready, floor time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			begin := time.Now()
			c, err := pglocal.Start(context.Background(), pglocal.Opts{Dir: filepath.Join(root, "floor")})
			require.NoError(b, err)
			floor += time.Since(begin)
			require.NoError(b, c.Stop(context.Background()))
			b.StartTimer()

			p, took := startServe(b, data)
			ready += took
			b.StopTimer()
			p.stop(b)
			b.StartTimer()
		}
		report(b, ready, floor, "postgres start")
	})
}

func report(b *testing.B, ready, floor time.Duration, floorName string) {
	n := float64(b.N)
	b.ReportMetric(float64(ready.Milliseconds())/n, "ms/ready")
	b.ReportMetric(float64(floor.Milliseconds())/n, "ms/floor")
	b.ReportMetric(float64(ready)/float64(floor), "x-floor")
	b.Logf("start to ready %.0f ms, floor (%s) %.0f ms, ratio %.2f",
		float64(ready.Milliseconds())/n, floorName, float64(floor.Milliseconds())/n, float64(ready)/float64(floor))
}

// BenchmarkIdleRSS reports serve's resident memory after it has been ready
// and idle for two seconds, on an external database.
func BenchmarkIdleRSS(b *testing.B) {
	for i := 0; i < b.N; i++ {
		p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbtest.NewDB(b))
		time.Sleep(2 * time.Second)
		rss := rssKiB(b, p.cmd.Process.Pid)
		p.stop(b)
		b.ReportMetric(float64(rss)/1024, "MiB-rss")
		b.Logf("idle RSS of serve: %.1f MiB", float64(rss)/1024)
	}
}

func rssKiB(b *testing.B, pid int) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(b, err)
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

func (p *proc) stop(b *testing.B) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		b.Fatal("serve did not stop")
	}
}
