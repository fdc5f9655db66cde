// Package node is sluice's vocabulary of nodes, the hosts services run on:
// the registry, enrolment with a one-time join token, node credentials,
// heartbeats, states and cordon.
//
// An operator adds a node with the labels placement reads, and gets a join
// token, shown once. The node's agent exchanges it, once, for a node
// credential, which it keeps; then it heartbeats about every 10 s. A node is
// Ready while its heartbeats come, Unreachable after a silence (Silence),
// Cordoned when an operator says nothing new goes there. Unreachable never
// moves or stops anything by itself.
//
// Every change an operator makes is a journal receipt, written in the same
// transaction as the change.
package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/nodeproto"
)

// States a node reads.
const (
	StateReady        = "Ready"
	StateUnreachable  = "Unreachable"
	StateCordoned     = "Cordoned"
	StateNeedsUpgrade = "Needs upgrade"
	// StateNeverReported is a node added whose agent has not joined yet, or
	// joined and never heartbeated.
	StateNeverReported = "Never reported"
	StateRevoked       = "Revoked"
)

// Journal actions of node changes.
const (
	ActionAdd      = "add_node"
	ActionJoin     = "join_node"
	ActionCordon   = "cordon_node"
	ActionUncordon = "uncordon_node"
	ActionLabels   = "set_node_labels"
	ActionRevoke   = "revoke_node"
	ActionDelete   = "delete_node"
	ActionRotate   = "rotate_node"
)

// Defaults of Registry's timings.
const (
	// DefaultSilence is how long a node may stay silent before it reads
	// Unreachable: three heartbeats, as Nomad counts.
	DefaultSilence = 30 * time.Second
	// JoinTokenTTL is how long a join token can be used.
	JoinTokenTTL = 24 * time.Hour
)

// MinAgentVersion is the oldest agent protocol this control plane drives.
const MinAgentVersion = 1

const joinTokenPrefix = "sluice_join_"

var labelKeyRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`)

// Registry keeps the nodes.
type Registry struct {
	Pool    *pgxpool.Pool
	Journal *journal.Journal
	// Silence is how long a node may be silent before it reads Unreachable.
	// Default DefaultSilence.
	Silence time.Duration
	// Started is when this control-plane process started: until Silence
	// has passed since, no node reads Unreachable, since the agents may not
	// have reached a control plane that was down. Zero: no grace.
	Started time.Time
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	authOnce sync.Once
	auths    chan struct{} // bounds the credential lookups in flight

	mu      sync.Mutex
	pending map[string]beat // heartbeats not yet written (see Flush)
	last    map[string]beat // the newest heartbeat this process took, per node
}

// beat is one heartbeat as this process took it.
type beat struct {
	instance string
	reported json.RawMessage
	at       time.Time
}

// maxAuthQueries bounds the credential lookups in flight at once, so that
// many agents at once queue for a few connections instead of taking the
// pool.
const maxAuthQueries = 4

// FlushEvery is how often RunFlusher writes the heartbeats it gathered.
const FlushEvery = time.Second

// RunFlusher writes the gathered heartbeats every FlushEvery until ctx
// ends, and once more then.
func (r *Registry) RunFlusher(ctx context.Context) {
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = r.Flush(fctx)
			cancel()
			return
		case <-t.C:
			_ = r.Flush(ctx)
		}
	}
}

// Flush writes the heartbeats gathered since the last flush, in one
// statement. On failure they are kept for the next one.
func (r *Registry) Flush(ctx context.Context) error {
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	p := &db.NodeHeartbeatManyParams{}
	for name, b := range batch {
		p.Names, p.Instances, p.Reported, p.Ats = append(p.Names, name), append(p.Instances, b.instance), append(p.Reported, b.reported), append(p.Ats, b.at)
	}
	if err := db.New(r.Pool).NodeHeartbeatMany(ctx, p); err != nil {
		r.mu.Lock()
		for name, b := range batch {
			if _, newer := r.pending[name]; !newer {
				if r.pending == nil {
					r.pending = map[string]beat{}
				}
				r.pending[name] = b
			}
		}
		r.mu.Unlock()
		return fmt.Errorf("write %d heartbeats: %w", len(batch), err)
	}
	return r.wakeOrphaned(ctx, p.Names)
}

// SilenceBound is how long a node may stay silent before it reads
// Unreachable.
func (r *Registry) SilenceBound() time.Duration { return r.silence() }

func (r *Registry) silence() time.Duration {
	if r.Silence > 0 {
		return r.Silence
	}
	return DefaultSilence
}

func (r *Registry) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reported is what an agent says of its host.
type Reported struct {
	Hostname     string `json:"hostname,omitempty"`
	OS           string `json:"os,omitempty"`
	Arch         string `json:"arch,omitempty"`
	AgentVersion string `json:"agentVersion,omitempty"`
	// Protocol is the agent protocol version it speaks.
	Protocol int `json:"protocol,omitempty"`
	// Session is the agent process's own id, new at each start: a task
	// claimed by an earlier session of the agent died with it.
	Session string `json:"session,omitempty"`
	// Processes is what runs on the host for each service it has a unit or
	// a process of, as the agent saw it at this heartbeat.
	Processes []Process `json:"processes,omitempty"`
}

// Process is one service's process as its node's agent reports it.
type Process struct {
	Service    string `json:"service"`
	Running    bool   `json:"running"`
	Pid        int    `json:"pid,omitempty"`
	NotRunning string `json:"notRunning,omitempty"`
	// UnitDigest and UnitHash describe the rendered unit on the host.
	UnitDigest string `json:"unitDigest,omitempty"`
	UnitHash   string `json:"unitHash,omitempty"`
	// ExeDigest is the digest of the bytes the process runs (empty when not
	// proven); Matches is true when that is UnitDigest.
	ExeDigest string `json:"exeDigest,omitempty"`
	Matches   bool   `json:"matches"`
	Proof     string `json:"proof,omitempty"`
	// Foreign says, when set, that what holds the service's name on the
	// host is not sluice's (its marker is gone).
	Foreign string `json:"foreign,omitempty"`
}

// Node is a node as the API shows it.
type Node struct {
	Name            string            `json:"name"`
	State           string            `json:"state"`
	Reason          string            `json:"reason"`
	Labels          map[string]string `json:"labels"`
	Reported        Reported          `json:"reported"`
	Local           bool              `json:"local"`
	Enrolled        bool              `json:"enrolled"`
	LastHeartbeatAt *time.Time        `json:"lastHeartbeatAt,omitempty"`
	CordonedAt      *time.Time        `json:"cordonedAt,omitempty"`
	CordonedBy      string            `json:"cordonedBy,omitempty"`
	RevokedAt       *time.Time        `json:"revokedAt,omitempty"`
	CreatedAt       time.Time         `json:"createdAt"`
	CreatedBy       string            `json:"createdBy"`
	// AgentInstance is the agent process that heartbeats for the node.
	AgentInstance string `json:"agentInstance,omitempty"`
}

// withBeats puts this process's newest heartbeat of each node, when newer
// than the database's, into rows.
func (r *Registry) withBeats(rows ...*db.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range rows {
		if b, ok := r.last[n.Name]; ok && (n.LastHeartbeatAt == nil || b.at.After(*n.LastHeartbeatAt)) {
			at := b.at
			n.LastHeartbeatAt, n.AgentInstance, n.Reported = &at, &b.instance, b.reported
		}
	}
}

// view turns a row into a Node with its state.
func (r *Registry) view(n *db.Node) *Node {
	v := &Node{
		Name: n.Name, Local: n.Local, Enrolled: n.CredentialIssuedAt != nil,
		LastHeartbeatAt: n.LastHeartbeatAt, CordonedAt: n.CordonedAt, RevokedAt: n.RevokedAt,
		CreatedAt: n.CreatedAt, CreatedBy: n.CreatedBy, Labels: map[string]string{},
	}
	_ = json.Unmarshal(n.Labels, &v.Labels)
	_ = json.Unmarshal(n.Reported, &v.Reported)
	if n.CordonedBy != nil {
		v.CordonedBy = *n.CordonedBy
	}
	v.AgentInstance = deref(n.AgentInstance)
	now := r.now()
	silent := n.LastHeartbeatAt == nil || now.Sub(*n.LastHeartbeatAt) > r.silence()
	grace := !r.Started.IsZero() && now.Sub(r.Started) < r.silence()
	switch {
	case n.RevokedAt != nil:
		v.State, v.Reason = StateRevoked, "Its credential was revoked; `sluice node rotate "+n.Name+"` issues a join token to enrol an agent again."
	case n.CordonedAt != nil:
		v.State, v.Reason = StateCordoned, fmt.Sprintf("Cordoned by %s: nothing new is placed here; what runs keeps running.", v.CordonedBy)
		if silent && n.LastHeartbeatAt != nil {
			// Cordoned says what an operator decided, not that the agent
			// answers: its silence is said too.
			v.Reason += fmt.Sprintf(" No heartbeat for %s (since %s).", now.Sub(*n.LastHeartbeatAt).Round(time.Second), n.LastHeartbeatAt.UTC().Format(time.RFC3339))
		}
	case n.LastHeartbeatAt == nil && !v.Enrolled:
		v.State, v.Reason = StateNeverReported, "No agent has joined yet: start `sluice agent` on the host with its join token."
	case n.LastHeartbeatAt == nil:
		v.State, v.Reason = StateNeverReported, "Its agent joined but has not reported yet."
	case !n.Local && v.Reported.Protocol < MinAgentVersion:
		v.State, v.Reason = StateNeedsUpgrade, fmt.Sprintf("Its agent speaks protocol %d; this control plane drives %d or newer: upgrade the agent.", v.Reported.Protocol, MinAgentVersion)
	case silent && grace:
		v.State, v.Reason = StateReady, "The control plane restarted lately; waiting for the agent's next heartbeat."
	case silent:
		v.State, v.Reason = StateUnreachable, fmt.Sprintf("No heartbeat for %s (since %s); what runs there keeps running and nothing is moved.",
			now.Sub(*n.LastHeartbeatAt).Round(time.Second), n.LastHeartbeatAt.UTC().Format(time.RFC3339))
	default:
		v.State, v.Reason = StateReady, "Heartbeats arrive."
	}
	if n.JoinExpiresAt != nil && n.CredentialHash != nil && n.RevokedAt == nil {
		v.Reason += fmt.Sprintf(" A new join token waits until %s: the agent that exchanges it takes over, and the current credential ends then.", n.JoinExpiresAt.UTC().Format(time.RFC3339))
	}
	return v
}

// ReportAge is how old n's last report (its newest heartbeat) is, and
// whether it is fresh: within the silence bound. A status read from a
// report that is not fresh says so, whatever n's state: a node reads Ready
// through the grace after a control-plane restart, and Cordoned however
// long its agent is silent, but neither proves what runs there.
func (r *Registry) ReportAge(n *Node) (age time.Duration, fresh bool) {
	if n.LastHeartbeatAt == nil {
		return 0, false
	}
	return r.Fresh(*n.LastHeartbeatAt)
}

// Fresh is the age of evidence taken at at, and whether it is within the
// silence bound.
func (r *Registry) Fresh(at time.Time) (age time.Duration, fresh bool) {
	age = r.now().Sub(at)
	return age, age <= r.silence()
}

// ValidateLabels refuses labels placement could not match reliably.
func ValidateLabels(labels map[string]string) error {
	for k, v := range labels {
		if !labelKeyRE.MatchString(k) {
			return errs.Errorf(errs.Invalid, "Label key %q: letters, digits, '.', '_', '/' and '-', 1 to 63 characters.", k)
		}
		if len(v) > 63 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return errs.Errorf(errs.Invalid, "Label %s: the value must be at most 63 characters with no control characters.", k)
		}
	}
	return nil
}

// AddResult is a new node and its join token, which is shown only here.
type AddResult struct {
	Node      *Node
	JoinToken string
	ExpiresAt time.Time
	Run       *db.JournalRun
}

// Add registers a node and gives out its one-time join token.
func (r *Registry) Add(ctx context.Context, name string, labels map[string]string, by string) (*AddResult, error) {
	if err := nodeproto.ValidateName(name); err != nil {
		return nil, err
	}
	if labels == nil {
		labels = map[string]string{}
	}
	if err := ValidateLabels(labels); err != nil {
		return nil, err
	}
	token, err := secret(joinTokenPrefix)
	if err != nil {
		return nil, err
	}
	lj, _ := json.Marshal(labels)
	expires := r.now().Add(JoinTokenTTL)
	res := &AddResult{JoinToken: token, ExpiresAt: expires}
	err = db.WithTx(ctx, r.Pool, func(ctx context.Context, tx pgx.Tx) error {
		row, err := db.New(tx).NodeInsert(ctx, &db.NodeInsertParams{
			Name: name, Labels: lj, CreatedBy: by, JoinTokenHash: hash(token), JoinExpiresAt: &expires,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Conflict, "Node %s already exists; delete it first (`sluice node delete %s`), or revoke its credential.", name, name)
		}
		if err != nil {
			return fmt.Errorf("insert node %s: %w", name, err)
		}
		res.Node = r.view(row)
		res.Run, err = r.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionAdd, Target: name, RequestedBy: by, Params: &LabelsParams{Labels: labels},
			Message: fmt.Sprintf("node %s added by %s with labels %s; its join token expires at %s", name, by, formatLabels(labels), expires.UTC().Format(time.RFC3339)),
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Join exchanges a join token for a node credential, once.
func (r *Registry) Join(ctx context.Context, name, joinToken string, rep Reported) (string, *Node, error) {
	if err := nodeproto.ValidateName(name); err != nil {
		return "", nil, err
	}
	cred, err := secret(nodeproto.CredentialPrefix)
	if err != nil {
		return "", nil, err
	}
	rj, _ := json.Marshal(rep)
	var n *Node
	err = db.WithTx(ctx, r.Pool, func(ctx context.Context, tx pgx.Tx) error {
		row, err := db.New(tx).NodeJoin(ctx, &db.NodeJoinParams{Name: name, JoinTokenHash: hash(joinToken), CredentialHash: hash(cred), Reported: rj})
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.Unauthorized, "The join token of node %s is not valid: it was used already, it expired, or the node does not exist. An admin issues a new one with `sluice node rotate %s` (or adds the node, if it does not exist).", name, name)
		}
		if err != nil {
			return fmt.Errorf("join node %s: %w", name, err)
		}
		n = r.view(row)
		_, err = r.Journal.RecordTx(ctx, tx, journal.RecordParams{
			Action: ActionJoin, Target: name, RequestedBy: "node:" + name, Params: rep,
			Message: fmt.Sprintf("the agent of node %s joined from host %q (%s/%s, agent %s)", name, rep.Hostname, rep.OS, rep.Arch, rep.AgentVersion),
		})
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return cred, n, nil
}

// Authenticate returns the node whose credential this is.
func (r *Registry) Authenticate(ctx context.Context, credential string) (*db.Node, error) {
	if !strings.HasPrefix(credential, nodeproto.CredentialPrefix) {
		return nil, errs.Errorf(errs.Unauthorized, "This is not a node credential.")
	}
	r.authOnce.Do(func() { r.auths = make(chan struct{}, maxAuthQueries) })
	select {
	case r.auths <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	n, err := db.New(r.Pool).NodeGetByCredential(ctx, hash(credential))
	<-r.auths
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.Unauthorized, "The node credential is not valid, or was revoked.")
	}
	if err != nil {
		return nil, fmt.Errorf("look up node credential: %w", err)
	}
	// The lookup is by hash; compare again in constant time all the same.
	if subtle.ConstantTimeCompare(n.CredentialHash, hash(credential)) != 1 {
		return nil, errs.Errorf(errs.Unauthorized, "The node credential is not valid, or was revoked.")
	}
	return n, nil
}

// Heartbeat records that the agent instance of node n, the row Authenticate
// returned for its credential (read once per request), is alive. A second
// agent claiming the node while the first one's heartbeats are fresh is
// refused with a Conflict that says so.
//
// Heartbeats are soft state: this process keeps the newest one per node in
// memory and RunFlusher writes them about once a second in one statement,
// so the database's load and connections do not grow with the agents. The
// claim check reads both this process's memory and the database (another
// process's agents, as of its last flush).
func (r *Registry) Heartbeat(n *db.Node, instance string, rep Reported) (*Node, error) {
	row, name := *n, n.Name
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.heldLocked(&row, instance, now); err != nil {
		return nil, err
	}
	rj, _ := json.Marshal(rep)
	b := beat{instance: instance, reported: rj, at: now}
	if r.pending == nil {
		r.pending, r.last = map[string]beat{}, map[string]beat{}
	}
	r.pending[name], r.last[name] = b, b
	row.AgentInstance, row.LastHeartbeatAt, row.Reported = &b.instance, &b.at, rj
	return r.view(&row), nil
}

// CheckHolder refuses agent instance when another agent holds node n: one
// that heartbeated within the silence.
func (r *Registry) CheckHolder(n *db.Node, instance string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.heldLocked(n, instance, r.now())
}

func (r *Registry) heldLocked(n *db.Node, instance string, now time.Time) error {
	holder, at := deref(n.AgentInstance), n.LastHeartbeatAt
	if b, ok := r.last[n.Name]; ok && (at == nil || b.at.After(*at)) {
		holder, at = b.instance, &b.at
	}
	if holder != "" && holder != instance && at != nil && now.Sub(*at) < r.silence() {
		return errs.Errorf(errs.Conflict, "Node %s is held by another agent (instance %s, last heartbeat %s ago); this one stops. Stop the other agent, or wait %s after it stopped.",
			n.Name, holder, now.Sub(*at).Round(time.Second), r.silence())
	}
	return nil
}

// Beat records a heartbeat of serve's own node, registering it first.
func (r *Registry) Beat(ctx context.Context, name string, rep Reported) error {
	rj, _ := json.Marshal(rep)
	_, err := db.New(r.Pool).NodeUpsertLocal(ctx, &db.NodeUpsertLocalParams{Name: name, Reported: rj})
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.Errorf(errs.Conflict, "Node %s exists as a node with an agent; give serve another SLUICE_NODE_NAME.", name)
	}
	return err
}

// WakeClaimed wakes the runs that wait without a worker for a step taken on
// serve's own node name: a serve that starts there calls it, since the
// serve that took the step may have died with it (see nodetask's decide).
func (r *Registry) WakeClaimed(ctx context.Context, name string) error {
	if _, err := db.New(r.Pool).RunParkWakeClaimedOn(ctx, name); err != nil {
		return fmt.Errorf("wake the runs waiting on node %s's steps: %w", name, err)
	}
	return nil
}

// wakeOrphaned wakes the runs that wait without a worker for a step the
// agent of one of nodes claimed before it restarted: they end unknown at
// once, not at the end of their wait. (serve's own node: WakeClaimed.)
func (r *Registry) wakeOrphaned(ctx context.Context, nodes []string) error {
	if _, err := db.New(r.Pool).RunParkWakeOrphaned(ctx, nodes); err != nil {
		return fmt.Errorf("wake the runs waiting on a restarted agent's steps: %w", err)
	}
	return nil
}

// Get returns one node.
func (r *Registry) Get(ctx context.Context, name string) (*Node, error) {
	row, err := db.New(r.Pool).NodeGet(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "Node %s does not exist.", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	r.withBeats(row)
	return r.view(row), nil
}

// List returns every node, by name.
func (r *Registry) List(ctx context.Context) ([]*Node, error) {
	return r.ListTx(ctx, db.New(r.Pool))
}

// ListTx is List through q: inside a transaction, on its connection.
func (r *Registry) ListTx(ctx context.Context, q *db.Queries) ([]*Node, error) {
	rows, err := q.NodeList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	r.withBeats(rows...)
	out := make([]*Node, 0, len(rows))
	for _, row := range rows {
		out = append(out, r.view(row))
	}
	return out, nil
}

// change runs fn on node name's locked row and records the receipt.
func (r *Registry) change(ctx context.Context, name, action, by string, params any, fn func(q *db.Queries, cur *db.Node) (*db.Node, string, error)) (*Node, *db.JournalRun, error) {
	var (
		n   *Node
		run *db.JournalRun
	)
	err := db.WithTx(ctx, r.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		cur, err := q.NodeGetForUpdate(ctx, name)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "Node %s does not exist.", name)
		}
		if err != nil {
			return fmt.Errorf("lock node %s: %w", name, err)
		}
		row, msg, err := fn(q, cur)
		if err != nil {
			return err
		}
		if row != nil {
			r.withBeats(row)
			n = r.view(row)
		}
		run, err = r.Journal.RecordTx(ctx, tx, journal.RecordParams{Action: action, Target: name, RequestedBy: by, Params: params, Message: msg})
		return err
	})
	return n, run, err
}

// Cordon says nothing new is placed on node name; what runs keeps running.
func (r *Registry) Cordon(ctx context.Context, name, by string) (*Node, *db.JournalRun, error) {
	return r.change(ctx, name, ActionCordon, by, nil, func(q *db.Queries, cur *db.Node) (*db.Node, string, error) {
		if cur.CordonedAt != nil {
			return nil, "", errs.Errorf(errs.Conflict, "Node %s is already cordoned (by %s).", name, deref(cur.CordonedBy))
		}
		now := r.now()
		row, err := q.NodeSetCordon(ctx, &db.NodeSetCordonParams{Name: name, CordonedAt: &now, CordonedBy: &by})
		return row, fmt.Sprintf("node %s cordoned by %s: nothing new is placed there; what runs keeps running", name, by), err
	})
}

// Uncordon lets placement use node name again.
func (r *Registry) Uncordon(ctx context.Context, name, by string) (*Node, *db.JournalRun, error) {
	return r.change(ctx, name, ActionUncordon, by, nil, func(q *db.Queries, cur *db.Node) (*db.Node, string, error) {
		if cur.CordonedAt == nil {
			return nil, "", errs.Errorf(errs.Conflict, "Node %s is not cordoned.", name)
		}
		row, err := q.NodeSetCordon(ctx, &db.NodeSetCordonParams{Name: name})
		return row, fmt.Sprintf("node %s uncordoned by %s (cordoned by %s at %s)", name, by, deref(cur.CordonedBy), cur.CordonedAt.UTC().Format(time.RFC3339)), err
	})
}

// SetLabels replaces node name's labels.
func (r *Registry) SetLabels(ctx context.Context, name string, labels map[string]string, by string) (*Node, *db.JournalRun, error) {
	if labels == nil {
		labels = map[string]string{}
	}
	if err := ValidateLabels(labels); err != nil {
		return nil, nil, err
	}
	return r.change(ctx, name, ActionLabels, by, &LabelsParams{Labels: labels}, func(q *db.Queries, cur *db.Node) (*db.Node, string, error) {
		var old map[string]string
		_ = json.Unmarshal(cur.Labels, &old)
		lj, _ := json.Marshal(labels)
		row, err := q.NodeSetLabels(ctx, &db.NodeSetLabelsParams{Name: name, Labels: lj})
		return row, fmt.Sprintf("labels of node %s set by %s: %s (were %s)", name, by, formatLabels(labels), formatLabels(old)), err
	})
}

// Revoke ends node name's credential (and an unused join token): its agent
// is refused from then on, and says why.
func (r *Registry) Revoke(ctx context.Context, name, by string) (*Node, *db.JournalRun, error) {
	return r.change(ctx, name, ActionRevoke, by, nil, func(q *db.Queries, cur *db.Node) (*db.Node, string, error) {
		if cur.RevokedAt != nil {
			return nil, "", errs.Errorf(errs.Conflict, "Node %s's credential is already revoked.", name)
		}
		if cur.Local {
			return nil, "", errs.Errorf(errs.Conflict, "Node %s is serve's own; it has no credential to revoke.", name)
		}
		row, err := q.NodeRevoke(ctx, &db.NodeRevokeParams{Name: name, RevokedBy: &by})
		return row, fmt.Sprintf("the credential of node %s was revoked by %s: its agent is refused from now on", name, by), err
	})
}

// Rotate issues node name a new join token, shown only in the result, for
// by. The agent started with it (SLUICE_JOIN_TOKEN) exchanges it for a new
// credential, and the node's current credential ends at that moment, so an
// agent keeps working until its replacement joins. A revoked node is
// enrolled afresh: its old credential stays dead. serve's own node has no
// credential to rotate.
func (r *Registry) Rotate(ctx context.Context, name, by string) (*AddResult, error) {
	token, err := secret(joinTokenPrefix)
	if err != nil {
		return nil, err
	}
	expires := r.now().Add(JoinTokenTTL)
	res := &AddResult{JoinToken: token, ExpiresAt: expires}
	n, run, err := r.change(ctx, name, ActionRotate, by, &RotateParams{ExpiresAt: expires}, func(q *db.Queries, cur *db.Node) (*db.Node, string, error) {
		if cur.Local {
			return nil, "", errs.Errorf(errs.Conflict, "Node %s is serve's own; it has no credential to rotate.", name)
		}
		row, err := q.NodeRotate(ctx, &db.NodeRotateParams{Name: name, JoinTokenHash: hash(token), JoinExpiresAt: &expires})
		if err != nil {
			return nil, "", fmt.Errorf("rotate node %s: %w", name, err)
		}
		what := "its agent keeps its credential until the new one joins"
		switch {
		case cur.RevokedAt != nil:
			what = "it was revoked, so it is enrolled afresh and its old credential stays dead"
		case cur.CredentialHash == nil:
			what = "no agent had joined"
		}
		return row, fmt.Sprintf("node %s given a new join token by %s, good until %s; %s", name, by, expires.UTC().Format(time.RFC3339), what), nil
	})
	if err != nil {
		return nil, err
	}
	res.Node, res.Run = n, run
	return res, nil
}

// Delete removes node name. PlacedFunc, when set, says what is placed on a
// node; a node with anything placed is refused.
func (r *Registry) Delete(ctx context.Context, name, by string, placed func(ctx context.Context, q *db.Queries, node string) ([]string, error)) (*db.JournalRun, error) {
	if placed == nil {
		placed = PlacedServices
	}
	_, run, err := r.change(ctx, name, ActionDelete, by, nil, func(q *db.Queries, cur *db.Node) (*db.Node, string, error) {
		if placed != nil {
			names, err := placed(ctx, q, name)
			if err != nil {
				return nil, "", err
			}
			if len(names) > 0 {
				return nil, "", errs.Errorf(errs.Conflict, "Node %s still has services placed on it (%s); move them first.", name, strings.Join(names, ", "))
			}
		}
		return nil, fmt.Sprintf("node %s deleted by %s", name, by), q.NodeDelete(ctx, name)
	})
	return run, err
}

// Placed is a service left running on a node, with its digest.
type Placed struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Services lists what the receipts left running on node name.
func (r *Registry) Services(ctx context.Context, name string) ([]Placed, error) {
	units, err := db.New(r.Pool).NodeServicesRunning(ctx, &name)
	if err != nil {
		return nil, fmt.Errorf("services on node %s: %w", name, err)
	}
	out := make([]Placed, len(units))
	for i, u := range units {
		out[i] = Placed{Name: u.Name, Digest: deref(u.RunningDigest)}
	}
	return out, nil
}

// PlacedServices lists the services left running on node.
func PlacedServices(ctx context.Context, q *db.Queries, node string) ([]string, error) {
	units, err := q.NodeServicesRunning(ctx, &node)
	if err != nil {
		return nil, fmt.Errorf("services on node %s: %w", node, err)
	}
	names := make([]string, len(units))
	for i, u := range units {
		names[i] = u.Name
	}
	return names, nil
}

func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func secret(prefix string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

func hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
