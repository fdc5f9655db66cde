package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/enginetest"
	"sluice/internal/gittest"
)

// BenchmarkConvergeContainer is POST converge → a new container of web
// running and answering its health check, on an agent's node whose engine
// is a real Podman, beside the floor: `docker run` of the same image by
// hand (the previous container removed first, as a converge replaces it),
// until it answers the same way. Both are read through the same forward
// into the engine's network.
func BenchmarkConvergeContainer(b *testing.B) {
	e := enginetest.Start(b)
	img := e.PushHello(b, enginetest.ImageOpts{Version: "v1"})
	repo, dbURL := gittest.New(b), dbtest.NewDB(b)
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+b.TempDir(), "SLUICE_NODE_NAME=-",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_SERVICE_DRIFT_INTERVAL_SEC=0")
	out, code := p.cliOut("node", "add", "n1")
	require.Equal(b, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	startAgentB(b, p, "n1", b.TempDir(), "SLUICE_JOIN_TOKEN="+token, "SLUICE_CONTAINER_HOST="+e.Host, "SLUICE_AGENT_HEARTBEAT_SEC=1")
	p.waitNode("n1", "Ready")
	const port, handPort = 18080, 18081
	probe := "http://" + e.Forward(b, fmt.Sprintf("127.0.0.1:%d", port)) + "/healthz"
	handProbe := "http://" + e.Forward(b, fmt.Sprintf("127.0.0.1:%d", handPort)) + "/healthz"
	repo.Commit(b, "web as a container", map[string]string{"services/web.json": containerUnit("web", "n1", img.Ref, port, probe, "", "")})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	// Credentials for the pull; both sides then start from the pulled image.
	e.Podman(b, "pull", "--creds", e.Registry.User+":"+e.Registry.Password, img.Ref)
	p.waitRunLong(p.accepted("/api/v1/services/web/converge", nil), "succeeded")

	engine := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.Socket)
	}}}
	containerID := func(name string) string {
		resp, err := engine.Get("http://engine/containers/" + name + "/json")
		require.NoError(b, err)
		defer resp.Body.Close()
		var c struct {
			ID    string `json:"Id"`
			State struct{ Running bool }
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&c) != nil || !c.State.Running {
			return ""
		}
		return c.ID
	}
	healthy := func(url string) bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	// upAgain waits until a container of name other than before runs and
	// url answers.
	upAgain := func(name, before, url string, begin time.Time) time.Duration {
		deadline := begin.Add(60 * time.Second)
		for {
			if id := containerID(name); id != "" && id != before && healthy(url) {
				return time.Since(begin)
			}
			require.True(b, time.Now().Before(deadline), "%s not up again within 60 s", name)
			time.Sleep(2 * time.Millisecond)
		}
	}
	cli, args := "docker", []string{"-H", e.Host}
	if _, err := exec.LookPath("docker"); err != nil {
		cli, args = "podman", []string{"--remote", "--url", e.Host}
	}
	byHandRun := func() {
		_ = exec.Command(cli, append(args, "rm", "--force", "byhand")...).Run()
		out, err := exec.Command(cli, append(args, "run", "--detach", "--name", "byhand", "--publish",
			fmt.Sprintf("127.0.0.1:%d:8080", handPort), img.Ref, "--listen", "0.0.0.0:8080")...).CombinedOutput()
		require.NoError(b, err, "%s", out)
	}
	b.Cleanup(func() { _ = exec.Command(cli, append(args, "rm", "--force", "byhand")...).Run() })

	var viaSluice, byHand []time.Duration
	b.ResetTimer()
	for b.Loop() {
		before := containerID("web")
		begin := time.Now()
		id := p.accepted("/api/v1/services/web/converge", nil)
		viaSluice = append(viaSluice, upAgain("web", before, probe, begin))
		p.waitRunLong(id, "succeeded")
		time.Sleep(300 * time.Millisecond)

		before = containerID("byhand")
		begin = time.Now()
		byHandRun()
		byHand = append(byHand, upAgain("byhand", before, handProbe, begin))
		time.Sleep(300 * time.Millisecond)
	}
	b.StopTimer()
	s50, s99, h50, h99 := percentile(viaSluice, 0.5), percentile(viaSluice, 0.99), percentile(byHand, 0.5), percentile(byHand, 0.99)
	b.ReportMetric(ms(s50), "ms-p50-converge")
	b.ReportMetric(ms(h50), "ms-p50-docker-run")
	b.ReportMetric(float64(s50)/float64(h50), "x-p50-vs-docker-run")
	b.Logf("POST converge → a new container running and healthy on an agent's Podman, %d each: p50 %.0f ms, p99 %.0f ms; %s run by hand (floor) p50 %.0f ms, p99 %.0f ms; "+
		"ratio p50 %.2f×, p99 %.2f× (goal ≤ 1.5×)", len(viaSluice), ms(s50), ms(s99), cli, ms(h50), ms(h99), float64(s50)/float64(h50), float64(s99)/float64(h99))
}
