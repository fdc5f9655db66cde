package httpapi_test

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The property run: requests generated from the served spec for every
// operation, each answer checked against what the spec declares. rapid
// generates and shrinks the cases; the 2020-12 validator checks the bodies.
//
// Each case is one of:
//   - valid: every parameter and the body drawn from their schemas (a path
//     parameter is often a value the seeded server holds, so that answers
//     other than 404 are reached), sent with a token of the role the
//     operation needs;
//   - invalid: a valid request with one value made invalid (past a bound,
//     a NUL, the wrong type, a required field gone, a field no schema
//     allows), which the validator confirms the schema refuses;
//   - no token, a bad token, and a viewer's token.
//
// No answer may be a 5xx or a status the operation does not declare; each
// body must match the schema declared for its status and content type; an
// invalid request must be refused with 400, 413 or 422, and a request
// without a good token with 401.

// propKinds are the kinds of case, in the order the summary prints them.
var propKinds = []string{"valid", "invalid", "no token", "bad token", "viewer"}

// propCounts is what the run sent and got back.
type propCounts struct {
	mu       sync.Mutex
	ops      int
	requests map[string]int // by kind
	statuses map[int]int
}

func (c *propCounts) add(kind string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests[kind]++
	c.statuses[status]++
}

func (c *propCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	var kinds []string
	for _, k := range propKinds {
		total += c.requests[k]
		kinds = append(kinds, fmt.Sprintf("%d %s", c.requests[k], k))
	}
	var codes []int
	for code := range c.statuses {
		codes = append(codes, code)
	}
	sort.Ints(codes)
	var statuses []string
	for _, code := range codes {
		statuses = append(statuses, fmt.Sprintf("%d×%d", c.statuses[code], code))
	}
	return fmt.Sprintf("property run: %d operations, %d requests (%s); answers %s; 0 server errors, 0 undeclared statuses, 0 schema violations",
		c.ops, total, strings.Join(kinds, ", "), strings.Join(statuses, " "))
}

// TestSpecProperties is the property run described above, after a pass
// that reaches every GET operation with the seeded values (every one of
// them must answer 200, with a body of its schema). A new operation is
// covered without a change here; a new path parameter wants a value in
// pathArg for the first pass.
func TestSpecProperties(t *testing.T) {
	t.Parallel()
	b := seedPropServer(t)
	ops := b.operations()
	require.GreaterOrEqual(t, len(ops), 70, "the walk found too few operations")

	tokenFor := func(o propOp) string {
		switch o.role {
		case "viewer":
			return b.viewer
		case "operator":
			return b.operator
		case "admin":
			return b.admin
		case "node":
			return b.nodeKey
		}
		return ""
	}

	t.Run("EveryGetReachesItsResource", func(t *testing.T) {
		walked := 0
		for _, o := range ops {
			ok200, _ := o.raw["responses"].(map[string]any)["200"].(map[string]any)
			content, _ := ok200["content"].(map[string]any)
			if o.method != http.MethodGet || content["application/json"] == nil {
				continue // not a read, or a stream or a file
			}
			r := &propRequest{path: map[string]string{}, query: url.Values{}, header: http.Header{}, token: tokenFor(o)}
			for _, p := range o.params {
				if p.in != "path" {
					continue
				}
				v, ok := b.knownArg(o.path, p.name)
				require.True(t, ok, "%s: give its path parameter %s a value in pathArg", o.path, p.name)
				r.path[p.name] = v
			}
			resp := b.send(t, o, r)
			require.Equal(t, http.StatusOK, resp.Status, "GET %s: %s", o.path, resp.Body)
			b.check(t, o, resp, "seeded")
			walked++
		}
		require.GreaterOrEqual(t, walked, 17, "the walk found too few JSON GET operations")
	})

	// rapid's case count, unless the command line sets one: enough to
	// reach every kind of case of every operation, within the two minutes
	// CI gives the run.
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.checks"] {
		require.NoError(t, flag.Set("rapid.checks", "40"))
	}
	if !set["rapid.nofailfile"] {
		require.NoError(t, flag.Set("rapid.nofailfile", "true"))
	}

	counts := &propCounts{requests: map[string]int{}, statuses: map[int]int{}}
	start := time.Now()
	for _, o := range ops {
		counts.ops++
		t.Run(o.id, func(t *testing.T) {
			kinds := []string{"valid", "invalid"}
			if o.role != "" {
				kinds = append(kinds, "no token", "bad token", "viewer")
			}
			rapid.Check(t, func(rt *rapid.T) {
				kind := rapid.SampledFrom(kinds).Draw(rt, "kind")
				r := b.draw(rt, o)
				r.token = tokenFor(o)
				switch kind {
				case "invalid":
					what, ok := b.spoil(rt, o, r)
					if !ok {
						rt.Skip("the spoiled value stayed valid")
					}
					resp := b.send(rt, o, r)
					counts.add(kind, resp.Status)
					b.check(rt, o, resp, "invalid "+what)
					refused := []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity}
					switch {
					case o.role == "node" && what == "path name":
						// The credential is weighed first: it does not reach that node.
						refused = append(refused, http.StatusForbidden)
					case o.role == "":
						// Its credential is a signature or in the body, weighed
						// (with the source it names) before the body is read.
						refused = append(refused, http.StatusUnauthorized, http.StatusNotFound)
					}
					require.Contains(rt, refused,
						resp.Status, "%s %s: invalid %s was not refused: %d %.300s", o.method, o.path, what, resp.Status, resp.Body)
					return
				case "no token":
					r.token = ""
				case "bad token":
					r.token = rapid.SampledFrom([]string{"nope", "sluice_" + strings.Repeat("0", 40), b.nodeKey + "x"}).Draw(rt, "token")
				case "viewer":
					r.token = b.viewer
				}
				resp := b.send(rt, o, r)
				counts.add(kind, resp.Status)
				b.check(rt, o, resp, kind)
				switch kind {
				case "no token", "bad token":
					require.Equal(rt, http.StatusUnauthorized, resp.Status, "%s %s with %s: %.300s", o.method, o.path, kind, resp.Body)
				case "viewer":
					if o.role != "viewer" {
						require.Contains(rt, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.Status,
							"%s %s needs %s, and a viewer got %d", o.method, o.path, o.role, resp.Status)
					}
				case "valid":
					if o.role == "" {
						break // its credential is in the body or a signature: drawn, so refused
					}
					require.NotEqual(rt, http.StatusBadRequest, resp.Status, "%s %s: a valid request read as malformed: %.300s", o.method, o.path, resp.Body)
					refused := []int{http.StatusUnauthorized, http.StatusForbidden}
					if o.role == "node" {
						refused = refused[:1] // a node reaches only what its open steps name
					}
					require.NotContains(rt, refused, resp.Status,
						"%s %s: the %s token was refused: %.300s", o.method, o.path, o.role, resp.Body)
				}
			})
		})
	}
	summary := counts.String() + fmt.Sprintf(", in %s", time.Since(start).Round(time.Second))
	t.Log(summary)
	if path := os.Getenv("SLUICE_TEST_REPORT"); path != "" && !t.Failed() {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = fmt.Fprintln(f, summary)
		require.NoError(t, errors.Join(err, f.Close()))
	}
}
