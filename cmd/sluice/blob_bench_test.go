package main

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
)

// bigBlobBytes is the size of the file no unit may be, but a repository
// may hold: issue #31 measured serve at 459 MB while it cloned one.
const bigBlobBytes = 100 << 20

// BenchmarkBigBlobRSS is serve's peak resident memory (VmHWM) while it
// syncs an intent repository that holds a 100 MiB file of random bytes
// (listed invalid: over the unit size limit), beside its resident memory
// idle before the sync. Clone: the first sync finds the file there. Fetch:
// the repository is synced small first, then the file is pushed and synced.
// The goal: a peak within 2× the idle figure.
func BenchmarkBigBlobRSS(b *testing.B) {
	big := make([]byte, bigBlobBytes)
	_, err := rand.Read(big)
	require.NoError(b, err)
	units := map[string]string{}
	for i := range 10 {
		units[fmt.Sprintf("apps/cfg-%02d.json", i)] = fmt.Sprintf(`{"kind": "Config", "metadata": {"name": "cfg-%02d"}, "spec": {"n": %d}}`, i, i)
	}

	for _, tc := range []struct {
		name  string
		fetch bool
	}{{"Clone", false}, {"Fetch", true}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				repo := gittest.New(b)
				if tc.fetch {
					repo.Commit(b, "units", units)
				} else {
					files := map[string]string{"blobs/big.bin": string(big)}
					for k, v := range units {
						files[k] = v
					}
					repo.Commit(b, "units and a big file", files)
				}
				p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbtest.NewDB(b), "SLUICE_GITOPS_REPO_URL="+repo.Bare,
					"SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0", "SLUICE_DRIFT_INTERVAL_SEC=0")
				pid := p.Cmd.Process.Pid
				if tc.fetch {
					run := p.waitRunLong(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
					require.Equal(b, "succeeded", run.State)
					repo.Commit(b, "a big file", map[string]string{"blobs/big.bin": string(big)})
				}
				time.Sleep(2 * time.Second)
				idle, before := rssKiB(b, pid), hwmKiB(b, pid)
				b.ResetTimer()
				run := p.waitRunLong(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
				b.StopTimer()
				require.Equal(b, "succeeded", run.State)
				peak := hwmKiB(b, pid)
				p.stop(b)
				b.ReportMetric(float64(idle)/1024, "idle_MiB")
				b.ReportMetric(float64(peak)/1024, "peak_MiB")
				b.ReportMetric(float64(peak)/float64(idle), "peak/idle")
				b.ReportMetric(float64(before)/1024, "peak_before_sync_MiB")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}
