package main

// The trials of a fault scenario, their kill moments, and the report each
// scenario prints.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// faultTrials is SLUICE_FAULT_TRIALS, default 3.
func faultTrials(t *testing.T) int {
	t.Helper()
	s := os.Getenv("SLUICE_FAULT_TRIALS")
	if s == "" {
		return 3
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "SLUICE_FAULT_TRIALS must be a whole number")
	require.Positive(t, n, "SLUICE_FAULT_TRIALS must be at least 1")
	return n
}

// faultRand is seeded by SLUICE_FAULT_SEED, else by the clock; the seed is
// logged so that a failing schedule can be run again.
func faultRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_FAULT_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "SLUICE_FAULT_SEED must be a whole number")
	}
	t.Logf("fault schedule seed %d (SLUICE_FAULT_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// stratified returns n moments uniform over [0, span), one in each of n
// equal slices in a random order, so that a few trials still cover the span
// evenly while each moment stays uniform.
func stratified(r *rand.Rand, n int, span time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i, slot := range r.Perm(n) {
		out[i] = time.Duration((float64(slot) + r.Float64()) / float64(n) * float64(span))
	}
	return out
}

// killSchedule is when each trial's kill lands: the even trials uniformly
// over 0–50 ms after the request, the odd ones uniformly over the action's
// whole length (a fraction of it, as the length is measured as the trials
// go).
type killSchedule struct {
	early []time.Duration
	whole []float64
}

func newKillSchedule(r *rand.Rand, trials int) *killSchedule {
	s := &killSchedule{early: stratified(r, (trials+1)/2, faultEarlyWindow)}
	for _, d := range stratified(r, trials/2, time.Second) {
		s.whole = append(s.whole, d.Seconds())
	}
	return s
}

// at returns trial i's delay after the request, given the action's length,
// and a label of its window.
func (s *killSchedule) at(i int, length time.Duration) (time.Duration, string) {
	if i%2 == 0 {
		return s.early[i/2], "0–50 ms"
	}
	return time.Duration(s.whole[i/2] * float64(length)), "whole action, " + length.Round(time.Millisecond).String()
}

// faultReport collects what a scenario injected and checked, and logs the
// scenario's one-line summary when it ends.
type faultReport struct {
	t        *testing.T
	scenario string
	begin    time.Time
	trials   int

	mu       sync.Mutex
	step     string // what the scenario is doing, for the summary of a failure
	finished bool   // the scenario ran to its end (its failures did not stop it)
	injected map[string]int
	checked  map[string]int
	outcomes map[string]int
	notes    []string
	failures []string
}

func newFaultReport(t *testing.T, scenario string, trials int) *faultReport {
	r := &faultReport{t: t, scenario: scenario, begin: time.Now(), trials: trials,
		injected: map[string]int{}, checked: map[string]int{}, outcomes: map[string]int{}}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		verdict := "nothing lost"
		if t.Failed() {
			verdict = "FAILED"
			if !r.finished && r.step != "" {
				verdict += ", stopped at " + r.step
			}
		}
		line := fmt.Sprintf("FAULTS %s: %s; %d trial(s) in %s; injected %s; checked %s",
			r.scenario, verdict, r.trials, time.Since(r.begin).Round(100*time.Millisecond), faultCounts(r.injected), faultCounts(r.checked))
		if len(r.outcomes) > 0 {
			line += "; outcomes " + faultCounts(r.outcomes)
		}
		if len(r.failures) > 0 {
			line += "; failures: " + strings.Join(r.failures, "; ")
		}
		if len(r.notes) > 0 {
			line += "; " + strings.Join(r.notes, "; ")
		}
		t.Log(line)
	})
	return r
}

// at records what the scenario is doing now, for the summary of a failure.
func (r *faultReport) at(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.step = fmt.Sprintf(format, args...)
	r.t.Logf("[%5.1fs] %s", time.Since(r.begin).Seconds(), r.step)
}

// done marks the scenario as run to its end.
func (r *faultReport) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = true
}

// inject logs a fault and counts it under kind.
func (r *faultReport) inject(kind, format string, args ...any) {
	r.t.Helper()
	r.mu.Lock()
	r.injected[kind]++
	r.mu.Unlock()
	r.t.Logf("[%5.1fs] inject %s: "+format, append([]any{time.Since(r.begin).Seconds(), kind}, args...)...)
}

// held counts a check that held; detail (optional) is logged.
func (r *faultReport) held(check, format string, args ...any) {
	r.t.Helper()
	r.mu.Lock()
	r.checked[check]++
	r.mu.Unlock()
	if format != "" {
		r.t.Logf("[%5.1fs] check %s: "+format, append([]any{time.Since(r.begin).Seconds(), check}, args...)...)
	}
}

// fail records a check that did not hold, in the summary too, and lets
// the scenario go on: what it finds next is worth reporting as well.
func (r *faultReport) fail(summary, format string, args ...any) {
	r.t.Helper()
	r.mu.Lock()
	if !slices.Contains(r.failures, summary) {
		r.failures = append(r.failures, summary)
	}
	r.mu.Unlock()
	r.t.Errorf(format, args...)
}

// outcome counts one of the outcomes a scenario accepts (a fault healed on
// its own, or failed and was repaired).
func (r *faultReport) outcome(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[name]++
}

// note adds a remark to the summary line.
func (r *faultReport) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func faultCounts(m map[string]int) string {
	if len(m) == 0 {
		return "nothing"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// runConcurrently runs each scenario as a subtest, all at once. t.Run may
// be called from several goroutines; subtests that do not call t.Parallel
// are not held back by -parallel (2 on a 2-core machine), and these spend
// their time waiting on child processes, not on the CPU.
func runConcurrently(t *testing.T, scenarios map[string]func(t *testing.T)) {
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(name, scenarios[name])
		}()
	}
	wg.Wait()
}
