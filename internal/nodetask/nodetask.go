// Package nodetask is how a control-plane job hands a host step to the node
// a service runs on, and waits for it: a durable task in PostgreSQL.
//
// The protocol:
//
//  1. The job (in serve or any worker) inserts a task for the node, in state
//     queued, naming its run and the artifacts it may fetch. A trigger
//     notifies sluice_node_task.
//  2. The node's agent long-polls serve (POST …/nodes/{name}/tasks/claim).
//     serve holds the poll until a notification names the node, then claims
//     the oldest queued task for the agent's instance (FOR UPDATE SKIP
//     LOCKED): a task is taken once.
//  3. The agent takes the step (packages agent and hoststep), streams its events into
//     the job's run, and posts its result; it retries the post until the
//     control plane answers, so a restarted control plane loses no result.
//  4. The job, notified, reads the result and finishes the receipt, the
//     inventory change and the River job in one transaction, as before.
//
// A job never waits blindly: a claimed task whose agent goes silent for
// longer than the node silence, or whose node is taken by a new agent
// instance, is abandoned and the run ends unknown. A result that comes
// after that is kept on the task as the node's late report; it never
// rewrites the receipt.
package nodetask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sluice/db"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/nodeproto"
	"sluice/internal/pglisten"
	"sluice/internal/secretbox"
)

// LocalInstancePrefix begins the instance a serve's executor claims its own
// node's tasks as; the rest is the serve's River client id.
const LocalInstancePrefix = "serve-"

// Channel is the PostgreSQL channel task changes notify on.
const Channel = "sluice_node_task"

// Task states.
const (
	StateQueued    = "queued"
	StateClaimed   = "claimed"
	StateDone      = "done"
	StateAbandoned = "abandoned"
)

// Tasks keeps the node tasks of one process: dispatch and wait (a job),
// claim, events and results (serve, for agents).
type Tasks struct {
	Pool    *pgxpool.Pool
	Journal *journal.Journal
	Nodes   *node.Registry
	Logger  *slog.Logger
	// Poll is how often a waiting job looks at its task without a
	// notification: it sees a silent agent. Default 1 s.
	Poll time.Duration
	// Box seals the secrets a task hands its node, and opens them for the
	// claim. Nil: a task with secrets is refused.
	Box *secretbox.Box

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}

	claimsOnce sync.Once
	claims     chan struct{} // bounds the claim queries in flight
}

// maxClaimQueries bounds the claim queries in flight at once, so that 500
// agents polling together (a control plane that restarted) queue for a few
// connections instead of taking the pool.
const maxClaimQueries = 4

func (t *Tasks) claimSlot(ctx context.Context) (func(), error) {
	t.claimsOnce.Do(func() { t.claims = make(chan struct{}, maxClaimQueries) })
	select {
	case t.claims <- struct{}{}:
		return func() { <-t.claims }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *Tasks) poll() time.Duration {
	if t.Poll > 0 {
		return t.Poll
	}
	return time.Second
}

func (t *Tasks) logger() *slog.Logger {
	if t.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Logger
}

// subscribe wakes ch whenever key ("node:<name>" or "task:<id>") may have
// changed.
func (t *Tasks) subscribe(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	if t.subs == nil {
		t.subs = map[string]map[chan struct{}]struct{}{}
	}
	if t.subs[key] == nil {
		t.subs[key] = map[chan struct{}]struct{}{}
	}
	t.subs[key][ch] = struct{}{}
	t.mu.Unlock()
	return ch, func() {
		t.mu.Lock()
		delete(t.subs[key], ch)
		if len(t.subs[key]) == 0 {
			delete(t.subs, key)
		}
		t.mu.Unlock()
	}
}

// wake wakes the waiters of keys; none wakes every waiter.
func (t *Tasks) wake(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	signal := func(chans map[chan struct{}]struct{}) {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if keys == nil {
		for _, chans := range t.subs {
			signal(chans)
		}
		return
	}
	for _, k := range keys {
		signal(t.subs[k])
	}
}

// Register has l deliver task changes to t's waiters (the payload names
// the node and the task); after each (re)connect of l, t wakes every waiter,
// since notifications sent meanwhile are lost.
func (t *Tasks) Register(l *pglisten.Listener) {
	l.Handle(Channel, pglisten.Handler{
		Notify: func(payload string) {
			if f := strings.Fields(payload); len(f) >= 2 {
				t.wake("node:"+f[0], "task:"+f[1])
			}
		},
		Connected: func() { t.wake() },
	})
}

// Run listens on a listener of t's own until ctx ends: for a process (or a
// test) that listens to nothing else.
func (t *Tasks) Run(ctx context.Context) {
	l := pglisten.New(t.Pool, t.logger())
	t.Register(l)
	l.Run(ctx)
}

// Dispatch queues a host step for node, on behalf of run.
func (t *Tasks) Dispatch(ctx context.Context, nodeName string, run uuid.UUID, kind string, payload any, digests []string) (*db.NodeTask, error) {
	return t.DispatchSecrets(ctx, nodeName, run, kind, payload, digests, nil)
}

// DispatchSecrets is Dispatch for a step that hands its service secrets:
// their values are sealed to the task (bound to its id), apart from its
// payload, and given to the node with its claim.
func (t *Tasks) DispatchSecrets(ctx context.Context, nodeName string, run uuid.UUID, kind string, payload any, digests []string, secrets map[string]nodeproto.Secret) (*db.NodeTask, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode the %s task: %w", kind, err)
	}
	if digests == nil {
		digests = []string{}
	}
	id := uuid.New()
	var sealed []byte
	if len(secrets) > 0 {
		if t.Box == nil {
			return nil, errs.Errorf(errs.Unavailable, "This process holds no secret key, so it cannot hand node %s the secrets of the step.", nodeName)
		}
		plain, err := json.Marshal(secrets)
		if err != nil {
			return nil, fmt.Errorf("encode the secrets of the %s task", kind)
		}
		sealed, err = t.Box.Seal(plain, id[:])
		clear(plain)
		if err != nil {
			return nil, fmt.Errorf("seal the secrets of the %s task: %w", kind, err)
		}
	}
	row, err := db.New(t.Pool).NodeTaskInsert(ctx, &db.NodeTaskInsertParams{
		ID: id, Node: nodeName, RunID: run, Kind: kind, Payload: b, Digests: digests, SecretsSealed: sealed,
	})
	if err != nil {
		return nil, fmt.Errorf("queue the %s step for node %s: %w", kind, nodeName, err)
	}
	return row, nil
}

// Await waits until task is done and returns its result. It stops waiting,
// abandoning the task, when ctx ends; when the agent that claimed it goes
// silent for longer than the node silence or the node is taken by another
// agent instance (a journal.Unknown error: the step may have happened); and
// when the node stays unreachable for the silence before any agent claimed
// it (a plain error: the step was not taken).
func (t *Tasks) Await(ctx context.Context, task *db.NodeTask) (*nodeproto.Result, error) {
	res, _, err := t.Wait(ctx, task.ID, 0)
	return res, err
}

// Wait is Await for at most d (0: no bound): when d passes first, it
// returns done false and leaves the task as it is, for a run that goes on
// waiting without a worker (see Park).
func (t *Tasks) Wait(ctx context.Context, id uuid.UUID, d time.Duration) (res *nodeproto.Result, done bool, err error) {
	ch, unsub := t.subscribe("task:" + id.String())
	defer unsub()
	tick := time.NewTicker(t.poll())
	defer tick.Stop()
	var bound <-chan time.Time
	if d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		bound = timer.C
	}
	silence := t.Nodes.SilenceBound()
	for {
		row, err := db.New(t.Pool).NodeTaskGet(ctx, id)
		if err != nil && ctx.Err() == nil {
			// The database may be restarting: look again at the next tick.
			t.logger().Warn("read node task", "task", id, "err", err)
		}
		if err == nil {
			res, stop, err := t.decide(ctx, row, silence)
			if stop {
				return res, true, err
			}
		}
		select {
		case <-ctx.Done():
			t.abandon(context.WithoutCancel(ctx), id, "the run stopped waiting: "+context.Cause(ctx).Error())
			return nil, true, ctx.Err()
		case <-bound:
			return nil, false, nil
		case <-ch:
		case <-tick.C:
		}
	}
}

// Look is one look at task id, as Wait takes at each wake: done false when
// its node has yet to answer and nothing says it never will.
func (t *Tasks) Look(ctx context.Context, id uuid.UUID) (*nodeproto.Result, bool, error) {
	row, err := db.New(t.Pool).NodeTaskGet(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("read node task %s: %w", id, err)
	}
	return t.decide(ctx, row, t.Nodes.SilenceBound())
}

// WakeKey is the key a run parked on task id is woken by (journal.WakeTx):
// Finish wakes it in the transaction that records the task's result.
func WakeKey(id uuid.UUID) string { return "task:" + id.String() }

// ReadyTx reports, in tx, whether task id has an answer already (done or
// abandoned). It holds the task's row FOR SHARE until tx ends, so a result
// recorded meanwhile waits for tx, and its wake then finds tx's park.
func ReadyTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (bool, error) {
	state, err := db.New(tx).NodeTaskStateForShare(ctx, id)
	if err != nil {
		return false, fmt.Errorf("read node task %s: %w", id, err)
	}
	return state == StateDone || state == StateAbandoned, nil
}

func (t *Tasks) decide(ctx context.Context, row *db.NodeTask, silence time.Duration) (*nodeproto.Result, bool, error) {
	switch row.State {
	case StateDone:
		var res nodeproto.Result
		if row.Result != nil {
			if err := json.Unmarshal(row.Result, &res); err != nil {
				return nil, true, fmt.Errorf("read the result of task %s: %w", row.ID, err)
			}
		}
		if row.Error != nil && res.Error == "" {
			res.Error = *row.Error
		}
		return &res, true, nil
	case StateAbandoned:
		return nil, true, journal.Unknown(fmt.Errorf("the %s step on node %s was abandoned (%s), so its outcome is unknown", row.Kind, row.Node, deref(row.AbandonReason)))
	}
	n, err := t.Nodes.Get(ctx, row.Node)
	if err != nil {
		if errs.CodeOf(err) == errs.NotFound {
			t.abandon(ctx, row.ID, "the node was deleted")
			return nil, true, fmt.Errorf("node %s was deleted while the %s step waited", row.Node, row.Kind)
		}
		return nil, false, nil
	}
	last := n.LastHeartbeatAt
	switch row.State {
	case StateClaimed:
		inst, sess, _ := strings.Cut(deref(row.ClaimedBy), "/")
		if id, local := strings.CutPrefix(inst, LocalInstancePrefix); local && t.Journal != nil {
			// Taken by a serve's executor on its own node: that serve's
			// process is the agent, alive while it holds its liveness lock.
			if gone, err := t.Journal.ProcessGone(ctx, id); err == nil && gone {
				why := fmt.Sprintf("the serve process that took the %s step on its own node %s (%s) stopped during it", row.Kind, row.Node, inst)
				t.abandon(ctx, row.ID, why)
				return nil, true, journal.Unknown(fmt.Errorf("%s, so whether the step happened is unknown; what runs there now is in the node's next report: converge to make it certain", why))
			}
		}
		now := n.AgentInstance + "/" + n.Reported.Session
		restarted := n.AgentInstance != "" && (n.AgentInstance != inst || (sess != "" && n.Reported.Session != "" && n.Reported.Session != sess))
		if restarted && last != nil && row.ClaimedAt != nil && last.After(*row.ClaimedAt) {
			why := fmt.Sprintf("node %s's agent restarted during the %s step (it was %s, now %s)", row.Node, row.Kind, deref(row.ClaimedBy), now)
			t.abandon(ctx, row.ID, why)
			return nil, true, journal.Unknown(fmt.Errorf("%s, so whether the step happened is unknown; what runs there now is in the node's next report: converge to make it certain", why))
		}
		from := row.ClaimedAt
		if last != nil && (from == nil || last.After(*from)) {
			from = last
		}
		// Nothing could be heard before this process started: a serve that
		// restarted does not take the time it was down for the agent's
		// silence (a run that waited without a worker meanwhile would end
		// unknown while the agent posts its result to the new serve).
		if st := t.Nodes.Started; !st.IsZero() && (from == nil || st.After(*from)) {
			from = &st
		}
		if from != nil && time.Since(*from) > silence {
			why := fmt.Sprintf("node %s's agent went silent during the %s step (nothing heard for %s)", row.Node, row.Kind, time.Since(*from).Round(time.Second))
			t.abandon(ctx, row.ID, why)
			return nil, true, journal.Unknown(fmt.Errorf("%s, so whether the step happened is unknown; a report that comes later is kept on the task", why))
		}
	case StateQueued:
		if n.State == node.StateRevoked {
			t.abandon(ctx, row.ID, "the node's credential was revoked")
			return nil, true, fmt.Errorf("node %s's credential was revoked, so no agent can take the %s step; it was not taken", row.Node, row.Kind)
		}
		if n.State == node.StateUnreachable || n.State == node.StateNeverReported {
			if time.Since(row.CreatedAt) > silence {
				t.abandon(ctx, row.ID, "no agent of the node took it")
				return nil, true, fmt.Errorf("node %s is %s: %s; no agent took the %s step within %s, so it was not taken", row.Node, strings.ToLower(n.State), n.Reason, row.Kind, silence)
			}
		}
	}
	return nil, false, nil
}

func (t *Tasks) abandon(ctx context.Context, id uuid.UUID, reason string) {
	if _, err := db.New(t.Pool).NodeTaskAbandon(ctx, &db.NodeTaskAbandonParams{ID: id, Reason: &reason}); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.logger().Warn("abandon node task", "task", id, "err", err)
	}
}

// Claim gives the oldest queued task of node to agent instance, waiting up
// to wait for one; nil when none came.
func (t *Tasks) Claim(ctx context.Context, nodeName, instance string, wait time.Duration) (*db.NodeTask, error) {
	ch, unsub := t.subscribe("node:" + nodeName)
	defer unsub()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		release, err := t.claimSlot(ctx)
		if err != nil {
			return nil, nil
		}
		row, err := db.New(t.Pool).NodeTaskClaim(ctx, &db.NodeTaskClaimParams{Node: nodeName, ClaimedBy: &instance})
		release()
		if err == nil {
			return row, nil
		}
		if ctx.Err() != nil {
			return nil, nil // the poll ended while it asked: none came
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("claim a task of node %s: %w", nodeName, err)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-timer.C:
			return nil, nil
		case <-ch:
		}
	}
}

// ClaimStep is Claim as node's executor takes a task: with the values of
// its secrets opened. A task whose secrets do not open (this process holds
// another key) is finished at once with that sentence as its error, rather
// than left claimed with nobody to take it, and none is returned.
func (t *Tasks) ClaimStep(ctx context.Context, nodeName, instance string, wait time.Duration) (*nodeproto.Claimed, error) {
	row, err := t.Claim(ctx, nodeName, instance, wait)
	if err != nil || row == nil {
		return nil, err
	}
	c, err := t.claimed(row)
	if err != nil {
		t.logger().Error("a claimed task's secrets do not open; it fails", "task", row.ID, "err", err)
		if _, ferr := t.Finish(ctx, nodeName, instance, row.ID, &nodeproto.Result{Error: err.Error()}); ferr != nil {
			t.logger().Error("fail the task", "task", row.ID, "err", ferr)
		}
		return nil, nil
	}
	return c, nil
}

// claimed is a claimed task as its node's executor gets it, with the
// values of its secrets opened.
func (t *Tasks) claimed(row *db.NodeTask) (*nodeproto.Claimed, error) {
	c := &nodeproto.Claimed{ID: row.ID, Run: row.RunID, Kind: row.Kind, Payload: row.Payload}
	if len(row.SecretsSealed) == 0 {
		return c, nil
	}
	if t.Box == nil {
		return nil, errs.Errorf(errs.Unavailable, "Task %s hands its node secrets, and this process holds no secret key to open them.", row.ID)
	}
	plain, err := t.Box.Open(row.SecretsSealed, row.ID[:])
	if err != nil {
		return nil, errs.Errorf(errs.Unavailable, "The secrets of task %s do not open with %s (%s); the step is not taken.", row.ID, t.Box.Origin(), err)
	}
	defer clear(plain)
	if err := json.Unmarshal(plain, &c.Secrets); err != nil {
		return nil, fmt.Errorf("the secrets of task %s do not decode", row.ID)
	}
	return c, nil
}

// own returns task id when it is node's, else Forbidden (or NotFound).
func (t *Tasks) own(ctx context.Context, nodeName string, id uuid.UUID) (*db.NodeTask, error) {
	row, err := db.New(t.Pool).NodeTaskGet(ctx, id)
	return ownRow(row, err, nodeName, id)
}

// ownRow turns a read of task id into the task when it is node's, else
// NotFound or Forbidden.
func ownRow(row *db.NodeTask, err error, nodeName string, id uuid.UUID) (*db.NodeTask, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "Task %s does not exist.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	if row.Node != nodeName {
		return nil, errs.Errorf(errs.Forbidden, "Task %s is not node %s's.", id, nodeName)
	}
	return row, nil
}

// Events appends an agent's events of task id to the task's run. Events
// for a run that has finished are dropped: its receipt is closed (the
// result, when it comes, is kept as the late report).
func (t *Tasks) Events(ctx context.Context, nodeName, instance string, id uuid.UUID, evs []nodeproto.Event) (dropped int, err error) {
	row, err := t.own(ctx, nodeName, id)
	if err != nil {
		return 0, err
	}
	if row.ClaimedBy == nil || *row.ClaimedBy != instance {
		return 0, errs.Errorf(errs.Conflict, "Task %s was claimed by another agent instance.", id)
	}
	for i, e := range evs {
		var data any
		if len(e.Data) > 0 {
			data = e.Data
		}
		if err := t.Journal.Append(ctx, row.RunID, e.Level, e.Message, data); err != nil {
			if errors.Is(err, journal.ErrRunFinished) {
				return len(evs) - i, nil
			}
			return 0, err
		}
	}
	return 0, nil
}

// Finish records the result of task id from agent instance. Posting the
// same result again (the answer was lost) is harmless.
func (t *Tasks) Finish(ctx context.Context, nodeName, instance string, id uuid.UUID, res *nodeproto.Result) (*nodeproto.Finished, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var out *nodeproto.Finished
	err = db.WithTx(ctx, t.Pool, func(ctx context.Context, tx pgx.Tx) error {
		q := db.New(tx)
		// Read and locked in the transaction: two posts of one result
		// take turns.
		row, err := q.NodeTaskGetForUpdate(ctx, id)
		row, err = ownRow(row, err, nodeName, id)
		if err != nil {
			return err
		}
		if row.ClaimedBy == nil || *row.ClaimedBy != instance {
			return errs.Errorf(errs.Conflict, "Task %s was claimed by another agent instance, not %s.", id, instance)
		}
		run, err := q.JournalRunGet(ctx, row.RunID)
		if err != nil {
			return fmt.Errorf("read run %s: %w", row.RunID, err)
		}
		switch {
		case row.State == StateDone:
			out = &nodeproto.Finished{Message: "The result was recorded already."}
			return nil
		case row.State == StateClaimed && !journal.IsFinal(run.State):
			if _, err := q.NodeTaskFinish(ctx, &db.NodeTaskFinishParams{ID: id, Node: nodeName, ClaimedBy: &instance, Result: b}); err != nil {
				return fmt.Errorf("record the result of task %s: %w", id, err)
			}
			// A run that waits for it without a worker goes on now.
			if _, err := journal.WakeTx(ctx, tx, WakeKey(id)); err != nil {
				return err
			}
			out = &nodeproto.Finished{Message: "Recorded; run " + run.ID.String() + " goes on with it."}
			return nil
		case row.State == StateClaimed:
			reason := "run " + run.ID.String() + " had ended " + run.State + " before the result came"
			if _, err := q.NodeTaskAbandon(ctx, &db.NodeTaskAbandonParams{ID: id, Reason: &reason}); err != nil {
				return err
			}
		}
		if _, err := q.NodeTaskLate(ctx, &db.NodeTaskLateParams{ID: id, Node: nodeName, Result: b, Error: nonEmpty(res.Error)}); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("keep the late report of task %s: %w", id, err)
		}
		out = &nodeproto.Finished{Late: true, Message: fmt.Sprintf("Run %s had ended %s; this result is kept on task %s as the node's late report and the receipt is unchanged.", run.ID, run.State, id)}
		return nil
	})
	return out, err
}

// ArtifactAllowed reports whether an open task of node names digest: the
// only artifacts a node's credential may download.
func (t *Tasks) ArtifactAllowed(ctx context.Context, nodeName, digest string) (bool, error) {
	return db.New(t.Pool).NodeTaskNamesDigest(ctx, &db.NodeTaskNamesDigestParams{Node: nodeName, Digest: digest})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
