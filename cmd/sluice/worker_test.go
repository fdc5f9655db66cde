package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

// startWorker starts `sluice worker` with env and waits until it works.
func startWorker(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(sluiceBin, "worker")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLUICE_LOG_FORMAT=json"}, env...)
	p := &proc{t: t, Proc: &proctest.Proc{Cmd: cmd, Logs: &proctest.SyncBuffer{}, Done: make(chan error, 1)}}
	cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	require.NoError(t, cmd.Start())
	go func() { p.Done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.Done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
		if t.Failed() {
			t.Logf("worker logs:\n%s", p.Logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.Logs.String(), "sluice worker is working") {
		select {
		case err := <-p.Done:
			t.Fatalf("worker exited before it worked: %v\n%s", err, p.Logs.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "worker not working after 60 s\n%s", p.Logs.String())
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func TestWorker(t *testing.T) {
	t.Parallel()

	t.Run("NeedsTheDatabaseServeUses", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(sluiceBin, "worker")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLUICE_DATA_DIR=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		require.Error(t, err)
		require.Contains(t, string(out), "sluice worker needs SLUICE_DATABASE_URL")
	})

	// serve runs no Terraform here (SLUICE_TERRAFORM_CONCURRENCY=0), so the
	// plan and the apply are the worker's, in a data dir of its own.
	t.Run("WorksTerraformInItsOwnDataDirAndStopsCleanly", func(t *testing.T) {
		t.Parallel()
		repo := gittest.New(t)
		unit := func(cidr string) string {
			return `{"kind":"Infrastructure","metadata":{"name":"network"},"spec":{"module":"infra/modules/network","inputs":{"cidr":"` + cidr + `"}}}`
		}
		repo.Commit(t, "network", map[string]string{
			"infra/network.json":            unit("10.0.0.0/16"),
			"infra/modules/network/main.tf": "variable \"cidr\" {}\nresource \"terraform_data\" \"net\" {\n  input = var.cidr\n}\n",
		})
		dbURL := dbtest.NewDB(t)
		key := "SLUICE_SECRET_KEY=" + strings.Repeat("ab", 32)
		serveDir, workerDir := t.TempDir(), t.TempDir()
		p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+serveDir, key,
			"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0", "SLUICE_TERRAFORM_CONCURRENCY=0")
		// serve syncs before the worker exists: the worker's own tree has never
		// seen the commit its plan needs, and fetches it.
		p.waitRunLong(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
		w := startWorker(t, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+workerDir, key)
		plan := p.waitRunLong(p.accepted("/api/v1/infrastructures/network/plan", nil), "succeeded")
		apply := p.waitRunLong(p.accepted("/api/v1/infrastructures/network/apply", nil), "succeeded")

		conn, err := pgx.Connect(context.Background(), dbURL)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		for _, id := range []string{plan.ID, apply.ID} {
			var by []string
			require.NoError(t, conn.QueryRow(context.Background(),
				`SELECT attempted_by FROM river_job WHERE id = (SELECT river_job_id FROM journal_run WHERE id = $1)`, id).Scan(&by))
			require.NotEmpty(t, by)
			require.Contains(t, w.Logs.String(), by[len(by)-1], "run %s was worked by the worker", id)
		}
		var status string
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT status FROM unit WHERE name = 'network'`).Scan(&status))
		require.Equal(t, "applied", status)
		_, err = os.Stat(filepath.Join(workerDir, "config", "archive", "infra", "network", "main.tf.json"))
		require.NoError(t, err, "the Terraform root lives in the worker's data dir")
		_, err = os.Stat(filepath.Join(serveDir, "config", "archive", "infra", "network"))
		require.True(t, os.IsNotExist(err), "serve ran no Terraform")

		w.term()
	})
}
