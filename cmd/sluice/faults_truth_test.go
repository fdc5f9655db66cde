package main

// The truth scenarios: a status that never lies while a fault is in force.
//
// One site (serve on its own node s0, on a PostgreSQL of the test's own; an
// agent node a1 in a network namespace of its own, reaching serve through a
// veth pair the test owns; a service on each node and a Blueprint on both)
// takes one fault after another: the agent killed with SIGKILL, frozen with
// SIGSTOP, cut off by taking its link down; both services' processes
// killed; serve killed with SIGKILL; PostgreSQL restarted. All the while a
// sampler reads every status route every 200 ms (each service's status, the
// Blueprint with its node rows, the nodes, the source's status, the
// applications) and judges each subject's reading against what the test
// knows: the processes alive or not (watched in /proc), the agent answering
// or not (as the test injected), the control plane up or not.
//
// A reading is green when its tone is ok (Running, Active, Ready,
// Accepted…). A lie is a green reading of a faulty subject more than
// truthBound after its fault began, or a reading that is not green of a
// healthy subject more than truthBound after it recovered. While the
// control plane is away (serve killed, PostgreSQL down) nothing is judged,
// and its return counts as every subject's recovery: each status may take
// truthBound to read fresh evidence.
//
// truthBound is the silence bound (SLUICE_NODE_UNREACHABLE_SEC, 3 s here:
// a silent node's statuses turn when its last report is that old), plus one
// heartbeat (SLUICE_AGENT_HEARTBEAT_SEC, 1 s ± 20%: a recovered agent
// reports within one, and a beat in flight when the fault struck lands after
// it), plus a margin of 2 s for what a loaded 2-core machine adds: a
// restarted agent's or serve's start, the heartbeat's write, a read's
// latency. A shorter bound would measure the machine's load, not the status.
//
// Each scenario ends with its line "FAULTS truth/<scenario>: … samples N,
// lies M (green while faulty G, fault while healthy F)", and fails when
// M > 0, naming each route and subject that lied, when, against which truth,
// and what it read.
//
// SLUICE_FAULT_TRIALS scales the windows: each fault is held truthBound
// plus 0.5 s a trial (1.5 s at least) before it is repaired, and watched as
// long after; the agent stays frozen 3 s a trial (a minute at 20 trials);
// every 10 trials add a round of each scenario.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/gittest"
	"sluice/internal/proctest"
)

const (
	truthSilence   = 3 * time.Second // SLUICE_NODE_UNREACHABLE_SEC
	truthHeartbeat = time.Second     // SLUICE_AGENT_HEARTBEAT_SEC
	truthMargin    = 2 * time.Second
	// truthBound is how long a status may read the old truth after it
	// changed: the silence bound, a heartbeat and a margin (see above).
	truthBound = truthSilence + truthHeartbeat + truthMargin
)

// The facts the test knows, and the subjects the statuses speak of.
const (
	factAgent  = "agent a1 answers"
	factSvcS0  = "web-s0's process runs"
	factSvcA1  = "web-a1's process runs"
	factCopyS0 = "site's copy runs on s0"
	factCopyA1 = "site's copy runs on a1"

	subjSvcS0  = "service web-s0"
	subjSvcA1  = "service web-a1"
	subjBP     = "Blueprint site"
	subjBPS0   = "Blueprint site on s0"
	subjBPA1   = "Blueprint site on a1"
	subjNodeS0 = "node s0"
	subjNodeA1 = "node a1"
	subjSource = "source default"
)

var truthDeps = map[string][]string{
	subjSvcS0:  {factControlPlane, factSvcS0},
	subjSvcA1:  {factControlPlane, factAgent, factSvcA1},
	subjBP:     {factControlPlane, factAgent, factCopyS0, factCopyA1},
	subjBPS0:   {factControlPlane, factCopyS0},
	subjBPA1:   {factControlPlane, factAgent, factCopyA1},
	subjNodeS0: {factControlPlane},
	subjNodeA1: {factControlPlane, factAgent},
	subjSource: {factControlPlane},
}

// netnsLink is a network namespace of the test's own, held by a sleeping
// process, joined to the test's namespace by a veth pair: hostIP on the
// test's side, nsIP on the namespace's.
type netnsLink struct {
	t            *testing.T
	path         string // the namespace, /proc/PID/ns/net
	hostIf, nsIf string
	hostIP, nsIP string
	holder       *exec.Cmd
}

// newNetnsLink makes the namespace and the link, or says why it cannot
// (it needs root and ip(8)).
func newNetnsLink(t *testing.T) (*netnsLink, error) {
	holder := exec.Command("sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("a process in a new network namespace: %w", err)
	}
	go func() { _ = holder.Wait() }()
	t.Cleanup(func() { _ = holder.Process.Kill() })
	r := rand.Uint32()
	net3, host4 := r>>8&0xff, (r&0x3f)*4
	n := &netnsLink{t: t, holder: holder, path: fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid),
		hostIf: fmt.Sprintf("sl%06xh", r>>8&0xffffff), nsIf: fmt.Sprintf("sl%06xn", r>>8&0xffffff),
		hostIP: fmt.Sprintf("10.251.%d.%d", net3, host4+1), nsIP: fmt.Sprintf("10.251.%d.%d", net3, host4+2)}
	steps := [][]string{
		{"ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf, "netns", strconv.Itoa(holder.Process.Pid)},
		{"ip", "addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"ip", "link", "set", n.hostIf, "up"},
		{"nsenter", "--net=" + n.path, "ip", "link", "set", "lo", "up"},
		{"nsenter", "--net=" + n.path, "ip", "addr", "add", n.nsIP + "/30", "dev", n.nsIf},
		{"nsenter", "--net=" + n.path, "ip", "link", "set", n.nsIf, "up"},
	}
	for i, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
		if i == 0 {
			t.Cleanup(func() { _ = exec.Command("ip", "link", "del", n.hostIf).Run() })
		}
	}
	return n, nil
}

// setLink takes the namespace's end of the link down (a cut: the agent's
// packets go nowhere, its connections hang) or up again.
func (n *netnsLink) setLink(state string) {
	out, err := exec.Command("nsenter", "--net="+n.path, "ip", "link", "set", n.nsIf, state).CombinedOutput()
	require.NoError(n.t, err, "%s", out)
}

// truthSite is the site the truth scenarios run on.
type truthSite struct {
	t                  *testing.T
	fc                 *faultCluster
	ns                 *netnsLink // nil: no namespace, the cut cannot be made
	env                []string
	url                string
	serve              *proc
	agent              *agentProc
	serveDir, agentDir string
	book               *truthBook
	smp                *sampler
	stopWatch          chan struct{}
}

// truthAgentEnv is the agent's environment, at its first start and after
// a kill. Over the test's own veth link it reaches serve by plain http://
// to a host that is not loopback, which the agent takes only when told.
func truthAgentEnv() []string {
	return []string{"SLUICE_AGENT_HEARTBEAT_SEC=" + strconv.Itoa(int(truthHeartbeat/time.Second)), "SLUICE_AGENT_ALLOW_HTTP=1"}
}

func newTruthSite(t *testing.T) *truthSite {
	s := &truthSite{t: t, fc: newFaultCluster(t), serveDir: t.TempDir(), agentDir: t.TempDir(), book: newTruthBook(truthDeps)}
	host, netns := "127.0.0.1", ""
	if ns, err := newNetnsLink(t); err != nil {
		t.Logf("the agent runs in the test's network namespace, and the cut is not made: %v", err)
	} else {
		s.ns, host, netns = ns, ns.hostIP, ns.path
	}
	repo := gittest.New(t)
	s.url = fmt.Sprintf("http://%s:%d", host, proctest.FreePort(t))
	s.env = faultEnv("SLUICE_DATABASE_URL="+s.fc.URL(), "SLUICE_DATA_DIR="+s.serveDir, "SLUICE_NODE_NAME=s0",
		"SLUICE_GITOPS_REPO_URL="+repo.Bare, "SLUICE_GITOPS_SYNC_INTERVAL_SEC=0",
		"SLUICE_NODE_UNREACHABLE_SEC="+strconv.Itoa(int(truthSilence/time.Second)),
		"SLUICE_LISTEN="+strings.TrimPrefix(s.url, "http://"))
	p, _ := startServe(t, s.env...)
	s.serve = p
	t.Cleanup(func() {
		for _, svc := range []string{"web-s0", "bp-site"} {
			proctest.KillService(s.serveDir, svc)
		}
		for _, svc := range []string{"web-a1", "bp-site"} {
			proctest.KillService(s.agentDir, svc)
		}
	})
	out, code := p.cliOut("node", "add", "a1")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	s.agent = startAgentIn(t, netns, p, "a1", s.agentDir, append(truthAgentEnv(), "SLUICE_JOIN_TOKEN="+token)...)
	t.Cleanup(func() { _ = s.agent.cmd.Process.Signal(syscall.SIGCONT) })
	p.waitNode("a1", "Ready")
	p.waitNode("s0", "Ready")

	v1 := p.pushArtifact(helloBuild(t, "v1"))
	repo.Commit(t, "a service on each node, a Blueprint on both", map[string]string{
		"services/web-s0.json": fleetUnit("web-s0", "s0", v1, proctest.FreePort(t), nil),
		// In a1's namespace every port is free.
		"services/web-a1.json": fleetUnit("web-a1", "a1", v1, proctest.FreePort(t), nil),
		"blueprints/site.json": `{"kind": "Blueprint", "metadata": {"name": "site"},
 "spec": {"template": {"runtime": "exec", "image": "` + v1 + `", "args": ["--listen", "127.0.0.1:0"], "stopTimeoutSec": 2},
          "selector": {"nodes": ["a1", "s0"]}, "stateful": false}}
`,
	})
	p.waitRun(p.accepted("/api/v1/gitops/sync", nil), "succeeded")
	for _, svc := range []string{"web-s0", "web-a1"} {
		p.waitRunLong(p.accepted("/api/v1/services/"+svc+"/converge", nil), "succeeded")
	}
	out, code = p.cliOut("placement", "approve", "site")
	require.Equal(t, 0, code, out)
	out, code = p.cliOut("rollout", "authorize", "site")
	require.Equal(t, 0, code, "authorize follows its rollout to its end: %s", out)

	s.smp = &sampler{base: func() string { return s.url }, book: s.book, bound: truthBound, routes: []sampledRoute{
		{"/api/v1/services/web-s0/status", readAnswer(subjSvcS0)},
		{"/api/v1/services/web-a1/status", readAnswer(subjSvcA1)},
		{"/api/v1/blueprints/site", readBlueprint(subjBP, []string{"a1", "s0"}, func(n string) string { return "Blueprint site on " + n })},
		{"/api/v1/nodes", readNodes(map[string]string{"s0": subjNodeS0, "a1": subjNodeA1})},
		{"/api/v1/sources/default/status", readAnswer(subjSource)},
		{"/api/v1/applications", readApplications(map[string]string{"service/web-s0": subjSvcS0, "service/web-a1": subjSvcA1, "blueprint/site": subjBP})},
	}}
	// Converged: every route reads every subject green, once.
	require.Eventually(t, func() bool {
		for _, r := range s.smp.routes {
			code, body := p.do("GET", r.path, testToken, nil)
			if code != 200 {
				return false
			}
			rs, err := r.read(body)
			require.NoError(t, err)
			for _, rd := range rs {
				if !rd.green() {
					t.Logf("before the faults, %s reads %s %q (tone %s): %s", r.path, rd.subject, rd.state, rd.tone, rd.reason)
					return false
				}
			}
		}
		return true
	}, 60*time.Second, 500*time.Millisecond, "the site never read green everywhere")
	now := time.Now()
	s.book.set(factControlPlane, true, now)
	s.book.set(factAgent, true, now)
	s.watch()
	s.smp.start()
	t.Cleanup(s.smp.halt)
	return s
}

// watch keeps the process facts: every 100 ms, whether each service's
// process (as its supervisor's pid.json names it) is alive.
func (s *truthSite) watch() {
	procs := map[string]string{
		factSvcS0:  filepath.Join(s.serveDir, "services", "web-s0", "pid.json"),
		factSvcA1:  filepath.Join(s.agentDir, "services", "web-a1", "pid.json"),
		factCopyS0: filepath.Join(s.serveDir, "services", "bp-site", "pid.json"),
		factCopyA1: filepath.Join(s.agentDir, "services", "bp-site", "pid.json"),
	}
	// A fact changes when the watcher first sees it changed: at most its
	// 100 ms late.
	look := func() {
		for fact, path := range procs {
			at := time.Now()
			s.book.set(fact, pidAlive(path), at)
		}
	}
	for fact, path := range procs {
		require.True(s.t, pidAlive(path), "%s before the faults", fact)
	}
	look()
	s.stopWatch = make(chan struct{})
	go func() {
		for {
			select {
			case <-s.stopWatch:
				return
			case <-time.After(100 * time.Millisecond):
			}
			look()
		}
	}()
	s.t.Cleanup(func() { close(s.stopWatch) })
}

// pidAlive reads a supervisor's pid.json and reports whether the process
// it names is alive.
func pidAlive(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var rec struct {
		Pid int `json:"pid"`
	}
	return json.Unmarshal(b, &rec) == nil && rec.Pid > 0 && alive(rec.Pid)
}

func pidOf(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rec struct {
		Pid int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	require.Positive(t, rec.Pid)
	return rec.Pid
}

// truthWindows are a scenario's lengths, scaled by the trials.
type truthWindows struct {
	hold   time.Duration // how long a fault is held
	watch  time.Duration // how long after the repair the statuses are watched
	freeze time.Duration // how long the agent stays frozen
	rounds int
}

func newTruthWindows(trials int) truthWindows {
	judged := max(1500*time.Millisecond, time.Duration(trials)*500*time.Millisecond)
	w := truthWindows{hold: truthBound + judged, watch: truthBound + judged, rounds: (trials + 9) / 10}
	w.freeze = min(max(time.Duration(trials)*3*time.Second, w.hold), time.Minute)
	return w
}

// scenario runs rounds of inject, each a fault held and repaired, counting
// the samples from the first injection to the end of the last watch.
func (s *truthSite) scenario(t *testing.T, name string, rounds int, inject func(t *testing.T, rep *faultReport, round int)) {
	rep := newFaultReport(t, "truth/"+name, rounds)
	tally := &truthTally{perRoute: map[string]int{}}
	begin := time.Now()
	s.smp.count(tally)
	for i := range rounds {
		rep.at("round %d/%d", i+1, rounds)
		inject(t, rep, i)
	}
	s.smp.count(nil)
	s.smp.mu.Lock()
	defer s.smp.mu.Unlock()
	rep.note("%s", tally.summary())
	for _, r := range s.smp.routes {
		if tally.perRoute[r.path] == 0 {
			rep.fail("a route never sampled", "%s: %s was never read (%d answers not 200)", name, r.path, tally.failed)
		}
	}
	if tally.unreadable > 0 {
		rep.fail("unreadable answers", "%s: %d answers of 200 could not be read: %s", name, tally.unreadable, tally.unreadableWhy)
	}
	if tally.failed+tally.unjudged > 0 {
		rep.note("%d answers not 200 (no sample), %d while the control plane was away (not judged)", tally.failed, tally.unjudged)
	}
	if sl := tally.slowest(); sl != "" {
		rep.note("%s; bound %s", sl, truthBound)
	}
	if len(tally.lies) > 0 {
		rep.fail(fmt.Sprintf("%d lies", len(tally.lies)), "%s: %d samples contradict the truth more than %s after it changed:\n%s",
			name, len(tally.lies), truthBound, lieLines(tally.lies, begin))
	} else {
		rep.held("no-lie", "%s", tally.summary())
	}
	rep.done()
}

// faultsStatusTruth runs the truth scenarios one after another on one site.
func faultsStatusTruth(t *testing.T, trials int) {
	s := newTruthSite(t)
	w := newTruthWindows(trials)
	t.Logf("truth windows: a fault held %s, watched %s after its repair, the agent frozen %s; %d round(s); bound %s",
		w.hold, w.watch, w.freeze, w.rounds, truthBound)

	t.Run("AgentKill9", func(t *testing.T) {
		s.scenario(t, "agent-kill9", w.rounds, func(t *testing.T, rep *faultReport, i int) {
			s.book.set(factAgent, false, time.Now())
			require.NoError(t, s.agent.cmd.Process.Kill())
			<-s.agent.over
			rep.inject("agent-kill9", "round %d: kill -9 of a1's agent; held %s", i+1, w.hold)
			time.Sleep(w.hold)
			s.agent = startAgentIn(s.t, s.netns(), s.serve, "a1", s.agentDir, truthAgentEnv()...)
			s.book.set(factAgent, true, time.Now())
			time.Sleep(w.watch)
		})
	})
	t.Run("AgentStop", func(t *testing.T) {
		s.scenario(t, "agent-sigstop", w.rounds, func(t *testing.T, rep *faultReport, i int) {
			s.book.set(factAgent, false, time.Now())
			require.NoError(t, s.agent.cmd.Process.Signal(syscall.SIGSTOP))
			rep.inject("agent-sigstop", "round %d: SIGSTOP of a1's agent for %s", i+1, w.freeze)
			time.Sleep(w.freeze)
			require.NoError(t, s.agent.cmd.Process.Signal(syscall.SIGCONT))
			s.book.set(factAgent, true, time.Now())
			time.Sleep(w.watch)
		})
	})
	t.Run("NetworkCut", func(t *testing.T) {
		if s.ns == nil {
			t.Skip("no network namespace for the agent (needs root and ip(8)): the cut is not made")
		}
		s.scenario(t, "network-cut", w.rounds, func(t *testing.T, rep *faultReport, i int) {
			s.book.set(factAgent, false, time.Now())
			s.ns.setLink("down")
			rep.inject("link-down", "round %d: a1's link to serve taken down for %s", i+1, w.hold)
			time.Sleep(w.hold)
			s.ns.setLink("up")
			s.book.set(factAgent, true, time.Now())
			time.Sleep(w.watch)
		})
	})
	t.Run("ServiceKill9", func(t *testing.T) {
		s.scenario(t, "service-kill9", w.rounds, func(t *testing.T, rep *faultReport, i int) {
			pids := map[string]int{
				"web-s0": pidOf(t, filepath.Join(s.serveDir, "services", "web-s0", "pid.json")),
				"web-a1": pidOf(t, filepath.Join(s.agentDir, "services", "web-a1", "pid.json")),
			}
			// The truth changes as they are killed: a status that reads the
			// host itself (web-s0's) sees it at once, before the watcher's
			// next look, which on a loaded machine came later than a read.
			now := time.Now()
			s.book.set(factSvcS0, false, now)
			s.book.set(factSvcA1, false, now)
			for _, pid := range pids {
				require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			}
			rep.inject("service-kill9", "round %d: kill -9 of web-s0's process (pid %d) and web-a1's (pid %d); held %s",
				i+1, pids["web-s0"], pids["web-a1"], w.hold)
			time.Sleep(w.hold)
			for _, svc := range []string{"web-s0", "web-a1"} {
				s.serve.waitRunLong(s.serve.accepted("/api/v1/services/"+svc+"/converge", nil), "succeeded")
			}
			rep.held("repaired", "round %d: both converged", i+1)
			time.Sleep(w.watch)
		})
	})
	t.Run("ServeKill9", func(t *testing.T) {
		s.scenario(t, "serve-kill9", w.rounds, func(t *testing.T, rep *faultReport, i int) {
			s.book.set(factControlPlane, false, time.Now())
			s.serve.kill9()
			begin := time.Now()
			s.serve, _ = startServe(s.t, s.env...)
			s.book.set(factControlPlane, true, time.Now())
			rep.inject("serve-kill9", "round %d: kill -9 of serve; the next one ready in %s", i+1, time.Since(begin).Round(time.Millisecond))
			time.Sleep(w.watch)
		})
	})
	t.Run("PostgresRestart", func(t *testing.T) {
		s.scenario(t, "postgres-restart", w.rounds, func(t *testing.T, rep *faultReport, i int) {
			mode := []string{"fast", "immediate"}[i%2]
			s.book.set(factControlPlane, false, time.Now())
			away := s.fc.restart(mode)
			s.book.set(factControlPlane, true, time.Now())
			rep.inject("postgres-"+mode, "round %d: PostgreSQL stopped (%s) and started again; away %s", i+1, mode, away.Round(time.Millisecond))
			time.Sleep(w.watch)
		})
	})
}

// netns is the agent's namespace, "" when it runs in the test's.
func (s *truthSite) netns() string {
	if s.ns == nil {
		return ""
	}
	return s.ns.path
}
