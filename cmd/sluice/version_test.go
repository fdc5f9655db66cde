package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/buildinfo"
	"sluice/internal/dbtest"
)

func TestVersion(t *testing.T) {
	t.Parallel()

	t.Run("PrintsTheBuildInfoAsTextAndJSON", func(t *testing.T) {
		t.Parallel()
		var out, errOut bytes.Buffer
		require.NoError(t, Run(context.Background(), []string{"version"}, &out, &errOut), errOut.String())
		info := buildinfo.Get()
		require.Regexp(t, `(?m)^version +`+regexp.QuoteMeta(info.Version)+`$`, out.String())
		require.Regexp(t, `(?m)^revision +`+regexp.QuoteMeta(info.Revision)+`( \(modified\))?$`, out.String())
		require.Regexp(t, `(?m)^go +`+regexp.QuoteMeta(runtime.Version())+`$`, out.String())

		out.Reset()
		require.NoError(t, Run(context.Background(), []string{"version", "-o", "json"}, &out, &errOut))
		var got buildinfo.Info
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		require.Equal(t, info, got)
	})

	t.Run("RefusesAnArgument", func(t *testing.T) {
		t.Parallel()
		var out, errOut bytes.Buffer
		require.ErrorContains(t, Run(context.Background(), []string{"version", "now"}, &out, &errOut), "no arguments")
	})

	// make build links with -buildvcs=true in a checkout, and VERSION=… sets
	// the version: the binary then names its commit.
	t.Run("ABinaryBuiltFromACheckoutNamesItsCommit", func(t *testing.T) {
		t.Parallel()
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Skipf("not a git checkout: %v", err)
		}
		bin := filepath.Join(t.TempDir(), "sluice")
		build := exec.Command("go", "build", "-buildvcs=true", "-ldflags", "-X sluice/internal/buildinfo.version=v9.8.7-test", "-o", bin, ".")
		out, err := build.CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(bin, "version", "--json").Output()
		require.NoError(t, err)
		var got buildinfo.Info
		require.NoError(t, json.Unmarshal(out, &got))
		require.Equal(t, "v9.8.7-test", got.Version)
		require.Equal(t, strings.TrimSpace(string(head)), got.Revision)
		require.False(t, got.Time.IsZero())
		require.Equal(t, runtime.Version(), got.GoVersion)
	})
}

// TestServeReportsItsBuild runs serve: `sluice version`, /healthz and
// sluice_build_info name the same build, and /metrics carries the figures
// of a running serve (its queues, its own node's heartbeat, its pool, the
// requests it answered).
func TestServeReportsItsBuild(t *testing.T) {
	t.Parallel()
	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t))
	out, stderr, code := p.cli(nil, "", "version", "--json")
	require.Equal(t, 0, code, stderr)
	var info buildinfo.Info
	require.NoError(t, json.Unmarshal([]byte(out), &info))

	status, body := p.do("GET", "/healthz", "", nil)
	require.Equal(t, 200, status)
	var health struct{ Status, Version, Revision, GoVersion string }
	require.NoError(t, json.Unmarshal(body, &health))
	require.Equal(t, "ok", health.Status)
	require.Equal(t, [3]string{info.Version, info.Revision, info.GoVersion}, [3]string{health.Version, health.Revision, health.GoVersion})

	status, body = p.do("GET", "/metrics", testToken, nil)
	require.Equal(t, 200, status)
	text := string(body)
	require.Contains(t, text, fmt.Sprintf("sluice_build_info{goversion=%q,revision=%q,version=%q} 1\n", info.GoVersion, info.Revision, info.Version))
	require.Contains(t, text, `sluice_http_request_duration_seconds_count{route="healthz",status="200"} `)
	require.Contains(t, text, `sluice_river_jobs{queue="default",state="available"} `)
	require.Contains(t, text, `sluice_river_queue_wait_seconds{queue="services"} `)
	require.Regexp(t, `(?m)^sluice_node_heartbeat_age_seconds\{node="[a-z0-9-]+"\} `, text, "serve's own node")
	require.Regexp(t, `(?m)^sluice_db_pool_max_connections [1-9][0-9]*$`, text)
}
