package main

// The status sampler of the truth scenarios (faults_truth_test.go): what the
// test knows is true (facts, each with its history), the subjects a status
// speaks of and the facts each depends on, the routes read every 200 ms, and
// the judge that counts a sample a lie.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// truthFact is a fact's value from a moment on.
type truthFact struct {
	at time.Time
	ok bool
}

// truthBook is what the test knows: each fact's history, as the test
// injected it (an agent killed, frozen or cut off; the control plane away)
// or as it watched it (a service's process alive), and the subjects a
// status speaks of, each with the facts it depends on.
type truthBook struct {
	mu    sync.Mutex
	facts map[string][]truthFact
	deps  map[string][]string // subject → the facts it depends on
}

func newTruthBook(deps map[string][]string) *truthBook {
	return &truthBook{facts: map[string][]truthFact{}, deps: deps}
}

// set records that fact is ok (or not) from at on; a value the fact already
// has is no change.
func (b *truthBook) set(fact string, ok bool, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.facts[fact]
	if len(h) > 0 && h[len(h)-1].ok == ok {
		return
	}
	b.facts[fact] = append(h, truthFact{at: at, ok: ok})
}

// truth is a subject's truth at a moment: healthy or faulty, and since when.
// known is false while the control plane is away, or before the facts were
// first set: no status can be judged then.
type truth struct {
	known   bool
	healthy bool
	since   time.Time
}

func (tr truth) String() string {
	if !tr.known {
		return "unknown"
	}
	word := "faulty"
	if tr.healthy {
		word = "healthy"
	}
	return word + " since " + tr.since.Format("15:04:05.000")
}

// at is subject's truth at moment at: healthy when every fact it depends on
// holds, since the last of them came to hold; faulty when one does not,
// since the first of those stopped holding (each has not held since its
// last change). A control plane away makes it unknown.
func (b *truthBook) at(subject string, at time.Time) truth {
	b.mu.Lock()
	defer b.mu.Unlock()
	var lastOK, firstBad time.Time
	bad := false
	for _, f := range b.deps[subject] {
		var cur *truthFact
		for i, c := range b.facts[f] {
			if c.at.After(at) {
				break
			}
			cur = &b.facts[f][i]
		}
		if cur == nil {
			return truth{}
		}
		if f == factControlPlane && !cur.ok {
			return truth{}
		}
		if cur.ok && cur.at.After(lastOK) {
			lastOK = cur.at
		}
		if !cur.ok && (!bad || cur.at.Before(firstBad)) {
			bad, firstBad = true, cur.at
		}
	}
	if bad {
		return truth{known: true, since: firstBad}
	}
	return truth{known: true, healthy: true, since: lastOK}
}

// factControlPlane is the fact every subject depends on: serve answers and
// its database is up. While it does not hold, nothing is judged; when it
// holds again, every status may take BOUND to read its evidence afresh.
const factControlPlane = "control plane"

// reading is what one route said of one subject.
type reading struct {
	subject, state, tone, reason string
}

// green is a reading of Running / Active / Ready: tone ok.
func (r reading) green() bool { return r.tone == "ok" }

// sampledRoute is a status route and how to read its subjects from its body.
type sampledRoute struct {
	path string
	read func(body []byte) ([]reading, error)
}

// lie is a sample that contradicts the truth more than the bound after
// the truth last changed.
type lie struct {
	route, subject string
	r              reading
	sent, answered time.Time
	tr             truth
}

// truthTally counts one scenario's samples.
type truthTally struct {
	samples, greenFaulty, faultHealthy int
	// failed counts the answers that were not 200 (no sample), unjudged
	// the readings taken while the control plane was away.
	failed, unjudged int
	// unreadable counts the answers of 200 the sampler could not read
	// (unreadableWhy the first one's error): a body that changed shape.
	unreadable    int
	unreadableWhy string
	perRoute      map[string]int // route → samples
	lies          []lie
	// slowFault and slowRecovery are the latest moments after a fault
	// began, and after a recovery, that a sample still read the old truth
	// (within the bound); their what says which route and subject.
	slowFault, slowRecovery         time.Duration
	slowFaultWhat, slowRecoveryWhat string
}

// slowest says how close to the bound the statuses came.
func (c *truthTally) slowest() string {
	var parts []string
	if c.slowFaultWhat != "" {
		parts = append(parts, fmt.Sprintf("a fault read %.1fs after it began (%s)", c.slowFault.Seconds(), c.slowFaultWhat))
	}
	if c.slowRecoveryWhat != "" {
		parts = append(parts, fmt.Sprintf("a recovery read %.1fs after it (%s)", c.slowRecovery.Seconds(), c.slowRecoveryWhat))
	}
	if len(parts) == 0 {
		return ""
	}
	return "slowest: " + strings.Join(parts, ", ")
}

func (c *truthTally) summary() string {
	return fmt.Sprintf("samples %d, lies %d (green while faulty %d, fault while healthy %d)",
		c.samples, c.greenFaulty+c.faultHealthy, c.greenFaulty, c.faultHealthy)
}

// sampler reads every route every 200 ms until stopped and judges each
// answer against the book. An answer that is not 200 (serve down, its
// database away) is no sample; it is counted apart.
type sampler struct {
	base   func() string
	book   *truthBook
	bound  time.Duration
	routes []sampledRoute
	client *http.Client

	mu    sync.Mutex
	tally *truthTally
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// sampleEvery is how often each route is read.
const sampleEvery = 200 * time.Millisecond

func (s *sampler) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.client = &http.Client{Timeout: 10 * time.Second}
	for _, r := range s.routes {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			tick := time.NewTicker(sampleEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				s.sample(ctx, r)
			}
		}()
	}
}

func (s *sampler) halt() {
	s.stop()
	s.wg.Wait()
}

// count sends the samples that follow to tally; nil drops them.
func (s *sampler) count(tally *truthTally) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tally = tally
}

func (s *sampler) sample(ctx context.Context, r sampledRoute) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.base()+r.path, nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	sent := time.Now()
	resp, err := s.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	answered := time.Now()
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.tally
	if c == nil {
		return
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		c.failed++
		return
	}
	readings, err := r.read(body)
	if err != nil {
		if c.unreadable == 0 {
			c.unreadableWhy = fmt.Sprintf("%s: %v", r.path, err)
		}
		c.unreadable++
		return
	}
	for _, rd := range readings {
		// Judged at both ends of the exchange: a lie only when the truth
		// at the request and at the answer both say so.
		t0, t1 := s.book.at(rd.subject, sent), s.book.at(rd.subject, answered)
		if !t0.known || !t1.known {
			c.unjudged++
			continue
		}
		c.samples++
		c.perRoute[r.path]++
		if t0.healthy != t1.healthy || rd.green() == t0.healthy {
			continue
		}
		age := sent.Sub(t0.since)
		if age <= s.bound {
			what := r.path + " of " + rd.subject
			if t0.healthy && age > c.slowRecovery {
				c.slowRecovery, c.slowRecoveryWhat = age, what
			}
			if !t0.healthy && age > c.slowFault {
				c.slowFault, c.slowFaultWhat = age, what
			}
			continue
		}
		if rd.green() {
			c.greenFaulty++
		} else {
			c.faultHealthy++
		}
		c.lies = append(c.lies, lie{route: r.path, subject: rd.subject, r: rd, sent: sent, answered: answered, tr: t0})
	}
}

// describeLies groups lies by route, subject and kind: how many, from and
// to when (seconds after begin), and the first reading in full.
func describeLies(lies []lie, begin time.Time) []string {
	type key struct{ route, subject, kind string }
	type group struct {
		n           int
		first, last lie
	}
	groups := map[key]*group{}
	var keys []key
	for _, l := range lies {
		kind := "green while faulty"
		if l.tr.healthy {
			kind = "fault while healthy"
		}
		k := key{l.route, l.subject, kind}
		g := groups[k]
		if g == nil {
			g = &group{first: l}
			groups[k] = g
			keys = append(keys, k)
		}
		g.n++
		g.last = l
	}
	sort.Slice(keys, func(i, j int) bool { return groups[keys[i]].n > groups[keys[j]].n })
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		out = append(out, fmt.Sprintf("%s of %s: %d sample(s) %s, from %.1fs to %.1fs (the truth %s, %.1fs before the first); first read %q (tone %s): %s",
			k.route, k.subject, g.n, k.kind, g.first.sent.Sub(begin).Seconds(), g.last.sent.Sub(begin).Seconds(),
			g.first.tr, g.first.sent.Sub(g.first.tr.since).Seconds(), g.first.r.state, g.first.r.tone, g.first.r.reason))
	}
	return out
}

// The routes' bodies, as much as the sampler reads of them.

type answerBody struct {
	Answer struct {
		State, Tone, Reason string
	} `json:"answer"`
}

func readAnswer(subject string) func([]byte) ([]reading, error) {
	return func(b []byte) ([]reading, error) {
		var v answerBody
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		return []reading{{subject, v.Answer.State, v.Answer.Tone, v.Answer.Reason}}, nil
	}
}

// readBlueprint reads the Blueprint's answer as subject and its node rows
// as rowSubject(node); a node in nodes without a row reads "(no row)".
func readBlueprint(subject string, nodes []string, rowSubject func(node string) string) func([]byte) ([]reading, error) {
	return func(b []byte) ([]reading, error) {
		var v struct {
			Nodes []struct {
				Node, State, Tone, Reason string
			} `json:"nodes"`
			Status answerBody `json:"status"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		a := v.Status.Answer
		out := []reading{{subject, a.State, a.Tone, a.Reason}}
		for _, n := range nodes {
			r := reading{subject: rowSubject(n), state: "(no row)"}
			for _, row := range v.Nodes {
				if row.Node == n {
					r.state, r.tone, r.reason = row.State, row.Tone, row.Reason
				}
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// readNodes reads each node in subjects (node → subject); Ready reads
// green (a node has no tone).
func readNodes(subjects map[string]string) func([]byte) ([]reading, error) {
	return func(b []byte) ([]reading, error) {
		var v struct {
			Nodes []struct {
				Name, State, Reason string
			} `json:"nodes"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		var out []reading
		for name, subject := range subjects {
			r := reading{subject: subject, state: "(not listed)"}
			for _, n := range v.Nodes {
				if n.Name == name {
					r.state, r.reason = n.State, n.Reason
					if n.State == "Ready" {
						r.tone = "ok"
					}
				}
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// readApplications reads each application in subjects ("kind/name" →
// subject).
func readApplications(subjects map[string]string) func([]byte) ([]reading, error) {
	return func(b []byte) ([]reading, error) {
		var v struct {
			Applications []struct {
				Kind, Name, State, Tone, Reason string
			} `json:"applications"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		var out []reading
		for key, subject := range subjects {
			r := reading{subject: subject, state: "(not listed)"}
			for _, a := range v.Applications {
				if a.Kind+"/"+a.Name == key {
					r.state, r.tone, r.reason = a.State, a.Tone, a.Reason
				}
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// lieLines is describeLies for a failure message.
func lieLines(lies []lie, begin time.Time) string {
	return strings.Join(describeLies(lies, begin), "\n")
}
