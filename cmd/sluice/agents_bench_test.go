package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
)

// BenchmarkAgents measures one serve under 500 agents, simulated by one
// process: each enrols (node add, join), then heartbeats every second (ten
// times the real rate, so 50 s of real load pass in 5 s) over its own
// keep-alive connection and long-polls its node's tasks over another. While
// they do, tasks are queued for random nodes, 20 a second. Reported: the
// heartbeat's p50 and p99 as an agent sees it, the dispatch latency (task
// committed → the agent has it) p50 and p99, serve's CPU and peak RSS over
// the storm, and the database connections serve holds before and during it
// (agents hold none: they never touch the database). Beside it, the idle
// RSS of one real `sluice agent`.
func BenchmarkAgents(b *testing.B) {
	const agents = 500
	dbURL := dbtest.NewDB(b)
	p, _ := startServe(b, "SLUICE_DATABASE_URL="+dbURL, "SLUICE_DATA_DIR="+b.TempDir(), "SLUICE_NODE_NAME=cp")
	// A pool: the task inserter and the connection sampler query at once,
	// which one pgx.Conn refuses ("conn busy").
	conn, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(b, err)
	defer conn.Close()
	conns := func() int {
		var n int
		require.NoError(b, conn.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'sluice'`).Scan(&n))
		return n
	}

	creds := make([]string, agents)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents}}
	post := func(path, token string, body any) (int, []byte) {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", p.URL+path, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		require.NoError(b, err)
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	for i := range agents {
		name := fmt.Sprintf("edge-%03d", i)
		status, body := post("/api/v1/nodes", testToken, map[string]any{"name": name, "labels": map[string]string{"zone": strconv.Itoa(i % 3)}})
		require.Equal(b, http.StatusCreated, status, string(body))
		var added struct {
			JoinToken string `json:"joinToken"`
		}
		require.NoError(b, json.Unmarshal(body, &added))
		status, body = post("/api/v1/nodes/"+name+"/join", "", map[string]any{"joinToken": added.JoinToken, "reported": map[string]any{"protocol": 1}})
		require.Equal(b, http.StatusOK, status, string(body))
		var joined struct {
			Credential string `json:"credential"`
		}
		require.NoError(b, json.Unmarshal(body, &joined))
		creds[i] = joined.Credential
	}
	idleConns := conns()
	cpu0 := cpuTicks(b, p.Cmd.Process.Pid)
	var runID string
	require.NoError(b, conn.QueryRow(context.Background(), `SELECT id::text FROM journal_run LIMIT 1`).Scan(&runID))
	pollClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: agents}}

	var (
		mu        sync.Mutex
		latencies []time.Duration
		dispatch  []time.Duration
		queuedAt  = map[string]time.Time{}
		maxConns  int
		wg        sync.WaitGroup
	)
	claim := func(name, cred string, stop time.Time) {
		for time.Now().Before(stop) {
			raw, _ := json.Marshal(map[string]any{"instance": "bench-" + name, "waitSec": 2})
			req, _ := http.NewRequest("POST", p.URL+"/api/v1/nodes/"+name+"/tasks/claim", bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+cred)
			resp, err := pollClient.Do(req)
			if err != nil {
				b.Errorf("claim of %s: %v", name, err)
				return
			}
			var t struct {
				ID string `json:"id"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&t)
			resp.Body.Close()
			got := time.Now()
			if resp.StatusCode == http.StatusOK {
				mu.Lock()
				if at, ok := queuedAt[t.ID]; ok {
					dispatch = append(dispatch, got.Sub(at))
				}
				mu.Unlock()
			} else if resp.StatusCode != http.StatusNoContent {
				b.Errorf("claim of %s: %d", name, resp.StatusCode)
				return
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		stop := time.Now().Add(5 * time.Second)
		for i := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				claim(fmt.Sprintf("edge-%03d", i), creds[i], stop)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Second) // the polls are in place
			for n := 0; time.Now().Add(time.Second).Before(stop); n++ {
				id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
				mu.Lock() // the claim may come before Exec returns
				_, err := conn.Exec(context.Background(), `INSERT INTO node_task (id, node, run_id, kind, payload) VALUES ($1, $2, $3, 'inspect', '{}')`,
					id, fmt.Sprintf("edge-%03d", (n*37)%agents), runID)
				queuedAt[id] = time.Now()
				mu.Unlock()
				require.NoError(b, err)
				time.Sleep(50 * time.Millisecond)
			}
		}()
		for i := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("edge-%03d", i)
				time.Sleep(time.Duration(i) * time.Second / agents) // spread over the first second
				for time.Now().Before(stop) {
					begin := time.Now()
					status, body := post("/api/v1/nodes/"+name+"/heartbeat", creds[i], map[string]any{"instance": "bench-" + name, "reported": map[string]any{"protocol": 1}})
					took := time.Since(begin)
					if status != http.StatusOK {
						b.Errorf("heartbeat of %s: %d %s", name, status, body)
						return
					}
					mu.Lock()
					latencies = append(latencies, took)
					mu.Unlock()
					time.Sleep(time.Second - took%time.Second)
				}
			}()
		}
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(250 * time.Millisecond):
					if n := conns(); n > maxConns {
						mu.Lock()
						maxConns = n
						mu.Unlock()
					}
				}
			}
		}()
		wg.Wait()
		close(done)
	}
	b.StopTimer()
	cpu := float64(cpuTicks(b, p.Cmd.Process.Pid)-cpu0) / 100 // clock ticks are 1/100 s on Linux
	p50, p99 := percentile(latencies, 0.5), percentile(latencies, 0.99)
	rss := hwmKiB(b, p.Cmd.Process.Pid)
	b.ReportMetric(ms(p50), "ms-p50-heartbeat")
	b.ReportMetric(ms(p99), "ms-p99-heartbeat")
	b.ReportMetric(float64(rss)/1024, "MiB-peak-rss")
	d50, d99 := percentile(dispatch, 0.5), percentile(dispatch, 0.99)
	b.ReportMetric(ms(d50), "ms-p50-dispatch")
	b.ReportMetric(ms(d99), "ms-p99-dispatch")
	b.Logf("dispatch under the same load: %d tasks, task committed → its agent has it p50 %.1f ms, p99 %.1f ms (%d of %d claimed)",
		len(dispatch), ms(d50), ms(d99), len(dispatch), len(queuedAt))
	b.Logf("%d agents heartbeating every second for 5 s: %d heartbeats, p50 %.1f ms, p99 %.1f ms; serve used %.1f s of CPU (%.0f%% of one core), peak RSS %.1f MiB; "+
		"serve's database connections %d idle, at most %d during the storm (the agents hold none)",
		agents, len(latencies), ms(p50), ms(p99), cpu, cpu/5*100, float64(rss)/1024, idleConns, maxConns)

	// One real agent, idle.
	out, code := p.cliOut("node", "add", "real")
	require.Equal(b, 0, code, out)
	token := strings.Fields(out[strings.Index(out, "sluice_join_"):])[0]
	a := startAgentB(b, p, "real", b.TempDir(), "SLUICE_JOIN_TOKEN="+token)
	time.Sleep(3 * time.Second)
	agentRSS := hwmKiB(b, a.Pid)
	b.ReportMetric(float64(agentRSS)/1024, "MiB-agent-rss")
	b.Logf("one sluice agent, idle after joining: peak RSS %.1f MiB", float64(agentRSS)/1024)
}

func startAgentB(b *testing.B, p *proc, name, dataDir string, env ...string) *os.Process {
	b.Helper()
	cmdEnv := append([]string{"PATH=" + os.Getenv("PATH"), "SLUICE_URL=" + p.URL, "SLUICE_NODE_NAME=" + name,
		"SLUICE_DATA_DIR=" + filepath.Join(dataDir, "agent")}, env...)
	proc, err := os.StartProcess(sluiceBin, []string{sluiceBin, "agent"}, &os.ProcAttr{Env: cmdEnv, Files: []*os.File{nil, nil, nil}})
	require.NoError(b, err)
	b.Cleanup(func() { _ = proc.Kill(); _, _ = proc.Wait() })
	return proc
}

// cpuTicks is the user and system CPU time pid used so far, in clock ticks.
func cpuTicks(b *testing.B, pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return utime + stime
}
