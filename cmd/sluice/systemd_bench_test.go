package main

import (
	"context"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
	"sluice/internal/systemdtest"
)

// BenchmarkConvergeSystemd measures POST converge → the unit's new start
// ActiveState=active on a systemd node (a booted container running the
// agent as its documented unit), beside its floor: `systemctl restart` of
// the same unit by hand, until it returns (the start job is done, which for
// Type=exec is the unit active). Both are timed from this process, which
// watches the unit over the container's D-Bus. One op is one of each; the
// first converge, which installs the artifact, is not timed.
func BenchmarkConvergeSystemd(b *testing.B) {
	box := systemdtest.Boot(b)
	repo, dbURL := gittest.New(b), dbtest.NewDB(b)
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+b.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0")
	startSystemdAgent(b, p, box, "box")
	digest := p.pushArtifact(helloBuild(b, "v1"))
	repo.Commit(b, "web under systemd", map[string]string{"services/web.json": systemdUnit("web", "box", digest, proctest.FreePort(b), "")})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	p.waitRunLong(p.accepted("/api/v1/services/web/converge", nil), "succeeded")

	conn, err := sdbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial("unix:path=" + box.BusSocket())
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		return c, c.Hello()
	})
	require.NoError(b, err)
	b.Cleanup(conn.Close)
	state := func() (string, string) {
		props, err := conn.GetUnitPropertiesContext(context.Background(), "sluice-web.service")
		require.NoError(b, err)
		id, _ := props["InvocationID"].([]byte)
		active, _ := props["ActiveState"].(string)
		return hex.EncodeToString(id), active
	}
	// activeAgain waits until a start other than before is active.
	activeAgain := func(before string, begin time.Time) time.Duration {
		deadline := begin.Add(60 * time.Second)
		for {
			id, active := state()
			if id != before && active == "active" {
				return time.Since(begin)
			}
			require.True(b, time.Now().Before(deadline), "sluice-web.service not restarted within 60 s")
			time.Sleep(2 * time.Millisecond)
		}
	}

	var viaSluice, byHand []time.Duration
	b.ResetTimer()
	for b.Loop() {
		before, _ := state()
		begin := time.Now()
		id := p.accepted("/api/v1/services/web/converge", nil)
		viaSluice = append(viaSluice, activeAgain(before, begin))
		p.waitRunLong(id, "succeeded")
		time.Sleep(300 * time.Millisecond)

		before, _ = state()
		begin = time.Now()
		box.Run(b, "systemctl", "restart", "sluice-web.service")
		byHand = append(byHand, activeAgain(before, begin))
		time.Sleep(300 * time.Millisecond)
	}
	b.StopTimer()
	s50, s99, h50, h99 := percentile(viaSluice, 0.5), percentile(viaSluice, 0.99), percentile(byHand, 0.5), percentile(byHand, 0.99)
	b.ReportMetric(ms(s50), "ms-p50-converge")
	b.ReportMetric(ms(h50), "ms-p50-systemctl")
	b.ReportMetric(float64(s50)/float64(h50), "x-p50-vs-systemctl")
	b.Logf("POST converge → ActiveState=active on a systemd node, %d each: p50 %.0f ms, p99 %.0f ms; systemctl restart by hand (floor) p50 %.0f ms, p99 %.0f ms; "+
		"ratio p50 %.2f×, p99 %.2f× (goal ≤ 1.5×)", len(viaSluice), ms(s50), ms(s99), ms(h50), ms(h99), float64(s50)/float64(h50), float64(s99)/float64(h99))
}
