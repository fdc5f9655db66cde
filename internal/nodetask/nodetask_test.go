package nodetask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"sluice/db"
	"sluice/internal/dbtest"
	"sluice/internal/errs"
	"sluice/internal/journal"
	"sluice/internal/node"
	"sluice/internal/nodeproto"
	"sluice/internal/nodetask"
	"sluice/internal/secretbox"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type testBundle struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	tasks *nodetask.Tasks
	run   uuid.UUID
}

// setup is two nodes (n1, n2) with fresh heartbeats, and one open run.
func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	j := journal.New(pool, nil, nil)
	nodes := &node.Registry{Pool: pool, Journal: j}
	for _, n := range []string{"n1", "n2"} {
		require.NoError(t, nodes.Beat(ctx, n, node.Reported{Protocol: node.MinAgentVersion}))
	}
	run, err := db.New(pool).JournalRunInsert(ctx, &db.JournalRunInsertParams{
		ID: uuid.New(), Action: "converge", Target: "web", RequestedBy: "test", Params: json.RawMessage(`{}`),
	})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE journal_run SET state = 'running', started_at = now() WHERE id = $1`, run.ID)
	require.NoError(t, err)
	tasks := &nodetask.Tasks{Pool: pool, Journal: j, Nodes: nodes, Poll: 20 * time.Millisecond}
	go tasks.Run(ctx)
	return &testBundle{ctx: ctx, pool: pool, tasks: tasks, run: run.ID}
}

func TestTasks(t *testing.T) {
	t.Parallel()

	t.Run("AClaimWaitsForItsNodesTaskAndTakesItOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got := make(chan *db.NodeTask, 2)
		for range 2 {
			go func() {
				task, err := b.tasks.Claim(b.ctx, "n1", "agent/s1", 5*time.Second)
				require.NoError(t, err)
				got <- task
			}()
		}
		time.Sleep(100 * time.Millisecond) // both polls wait
		_, err := b.tasks.Dispatch(b.ctx, "n2", b.run, nodeproto.KindStop, nodeproto.StopRequest{Name: "web"}, nil)
		require.NoError(t, err)
		sent, err := b.tasks.Dispatch(b.ctx, "n1", b.run, nodeproto.KindStop, nodeproto.StopRequest{Name: "web"}, nil)
		require.NoError(t, err)
		first := <-got
		require.NotNil(t, first)
		require.Equal(t, sent.ID, first.ID, "n1's poll takes n1's task, not n2's")
		select {
		case second := <-got:
			t.Fatalf("a task was taken twice: %v", second)
		case <-time.After(300 * time.Millisecond):
		}
	})

	t.Run("AResultReachesTheWaitingJobOnceAndOnlyFromItsClaimer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sent, err := b.tasks.Dispatch(b.ctx, "n1", b.run, nodeproto.KindUnitText, nodeproto.StopRequest{Name: "web"}, []string{"sha256:aa"})
		require.NoError(t, err)
		done := make(chan *nodeproto.Result, 1)
		go func() {
			res, err := b.tasks.Await(b.ctx, sent)
			require.NoError(t, err)
			done <- res
		}()
		task, err := b.tasks.Claim(b.ctx, "n1", "agent/s1", time.Second)
		require.NoError(t, err)

		ok, err := b.tasks.ArtifactAllowed(b.ctx, "n1", "sha256:aa")
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.tasks.ArtifactAllowed(b.ctx, "n2", "sha256:aa")
		require.NoError(t, err)
		require.False(t, ok, "another node's task names it, not n2's")

		_, err = b.tasks.Finish(b.ctx, "n2", "agent/s1", task.ID, &nodeproto.Result{})
		require.Equal(t, errs.Forbidden, errs.CodeOf(err), "another node's credential")
		_, err = b.tasks.Finish(b.ctx, "n1", "agent/s2", task.ID, &nodeproto.Result{})
		require.Equal(t, errs.Conflict, errs.CodeOf(err), "another session of the agent")
		_, err = b.tasks.Events(b.ctx, "n2", "agent/s1", task.ID, []nodeproto.Event{{Level: "info", Message: "x"}})
		require.Equal(t, errs.Forbidden, errs.CodeOf(err))

		res := &nodeproto.Result{Value: json.RawMessage(`{"text":"unit","missing":false}`)}
		f, err := b.tasks.Finish(b.ctx, "n1", "agent/s1", task.ID, res)
		require.NoError(t, err)
		require.False(t, f.Late)
		f, err = b.tasks.Finish(b.ctx, "n1", "agent/s1", task.ID, res)
		require.NoError(t, err, "posting again, after a lost answer, is harmless")
		require.False(t, f.Late)
		got := <-done
		require.JSONEq(t, `{"text":"unit","missing":false}`, string(got.Value))
	})

	t.Run("AResultForAFinishedRunIsKeptAsTheLateReport", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sent, err := b.tasks.Dispatch(b.ctx, "n1", b.run, nodeproto.KindStop, nodeproto.StopRequest{Name: "web"}, nil)
		require.NoError(t, err)
		task, err := b.tasks.Claim(b.ctx, "n1", "agent/s1", time.Second)
		require.NoError(t, err)
		require.Equal(t, sent.ID, task.ID)
		_, err = b.pool.Exec(b.ctx, `UPDATE journal_run SET state = 'unknown', finished_at = now(), error = 'lost' WHERE id = $1`, b.run)
		require.NoError(t, err)
		f, err := b.tasks.Finish(b.ctx, "n1", "agent/s1", task.ID, &nodeproto.Result{Error: "late but true"})
		require.NoError(t, err)
		require.True(t, f.Late)
		row, err := db.New(b.pool).NodeTaskGet(b.ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, nodetask.StateAbandoned, row.State)
		require.Equal(t, "late but true", *row.LateError)
		var state string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT state FROM journal_run WHERE id = $1`, b.run).Scan(&state))
		require.Equal(t, "unknown", state, "the receipt is unchanged")
	})

	t.Run("AClaimedStepWhoseAgentGoesSilentEndsUnknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.tasks.Nodes.Silence = 300 * time.Millisecond
		sent, err := b.tasks.Dispatch(b.ctx, "n1", b.run, nodeproto.KindStop, nodeproto.StopRequest{Name: "web"}, nil)
		require.NoError(t, err)
		_, err = b.tasks.Claim(b.ctx, "n1", "agent/s1", time.Second)
		require.NoError(t, err)
		_, err = b.tasks.Await(b.ctx, sent)
		var unknown *journal.UnknownError
		require.ErrorAs(t, err, &unknown)
		require.Contains(t, err.Error(), "went silent")
	})
}

func TestConcurrentPostsOfOneResultRecordIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.tasks.Dispatch(b.ctx, "n1", b.run, nodeproto.KindStop, nodeproto.StopRequest{Name: "web"}, nil)
	require.NoError(t, err)
	task, err := b.tasks.Claim(b.ctx, "n1", "agent/s1", time.Second)
	require.NoError(t, err)
	errsCh := make(chan error, 20)
	for range 20 {
		go func() {
			_, err := b.tasks.Finish(b.ctx, "n1", "agent/s1", task.ID, &nodeproto.Result{})
			errsCh <- err
		}()
	}
	for range 20 {
		require.NoError(t, <-errsCh, "a retried post never fails for racing the first")
	}
}

func TestSecrets(t *testing.T) {
	t.Parallel()

	const value = "s3cr3t-nodetask-\n$%'\"\x01"
	secrets := map[string]nodeproto.Secret{"DB": {Ref: "db-password@2", Value: []byte(value)}}
	newBox := func(t *testing.T) *secretbox.Box {
		k, err := secretbox.NewKey()
		require.NoError(t, err)
		box, err := secretbox.New(secretbox.Opts{Key: k})
		require.NoError(t, err)
		return box
	}
	// atRest is everything the task's row holds, as text.
	atRest := func(t *testing.T, b *testBundle, id uuid.UUID) (string, []byte) {
		var row string
		var sealed []byte
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT to_jsonb(t)::text, secrets_sealed FROM node_task t WHERE id = $1`, id).Scan(&row, &sealed))
		return row, sealed
	}

	t.Run("SealedToTheTaskGivenWithTheClaimClearedWhenDone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.tasks.Box = newBox(t)
		sent, err := b.tasks.DispatchSecrets(b.ctx, "n1", b.run, nodeproto.KindApply, map[string]string{"service": "web"}, nil, secrets)
		require.NoError(t, err)
		row, sealed := atRest(t, b, sent.ID)
		require.NotContains(t, row, "s3cr3t")
		require.NotContains(t, string(sealed), "s3cr3t")
		require.NotEmpty(t, sealed)

		c, err := b.tasks.ClaimStep(b.ctx, "n1", "agent-1", time.Second)
		require.NoError(t, err)
		require.Equal(t, sent.ID, c.ID)
		require.Equal(t, secrets, c.Secrets)
		require.NotContains(t, fmt.Sprintf("%v %+v %#v", c, c, c.Secrets), "s3cr3t")
		claimed, err := json.Marshal(c)
		require.NoError(t, err)
		require.NotContains(t, string(claimed), "s3cr3t", "a claim encodes its secrets")

		_, err = b.tasks.Finish(b.ctx, "n1", "agent-1", sent.ID, &nodeproto.Result{})
		require.NoError(t, err)
		_, sealed = atRest(t, b, sent.ID)
		require.Nil(t, sealed, "the secrets stayed at rest after the step")
	})

	t.Run("ClearedWhenAbandoned", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.tasks.Box = newBox(t)
		sent, err := b.tasks.DispatchSecrets(b.ctx, "n1", b.run, nodeproto.KindApply, map[string]string{}, nil, secrets)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(b.ctx)
		cancel() // the job stops waiting at once
		_, err = b.tasks.Await(ctx, sent)
		require.Error(t, err)
		require.Eventually(t, func() bool {
			_, sealed := atRest(t, b, sent.ID)
			return sealed == nil
		}, 5*time.Second, 10*time.Millisecond)
	})

	t.Run("AnotherKeyFailsTheTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.tasks.Box = newBox(t)
		sent, err := b.tasks.DispatchSecrets(b.ctx, "n1", b.run, nodeproto.KindApply, map[string]string{}, nil, secrets)
		require.NoError(t, err)
		other := &nodetask.Tasks{Pool: b.pool, Journal: b.tasks.Journal, Nodes: b.tasks.Nodes, Box: newBox(t)}
		c, err := other.ClaimStep(b.ctx, "n1", "agent-1", time.Second)
		require.NoError(t, err)
		require.Nil(t, c, "a task whose secrets do not open was handed out")
		got, err := db.New(b.pool).NodeTaskGet(b.ctx, sent.ID)
		require.NoError(t, err)
		require.Equal(t, nodetask.StateDone, got.State)
		var res nodeproto.Result
		require.NoError(t, json.Unmarshal(got.Result, &res))
		require.Contains(t, res.Error, "do not open")
		require.NotContains(t, string(got.Result), "s3cr3t")
		require.Nil(t, got.SecretsSealed)
	})

	t.Run("NoKeyNoTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.tasks.DispatchSecrets(b.ctx, "n1", b.run, nodeproto.KindApply, map[string]string{}, nil, secrets)
		require.ErrorContains(t, err, "holds no secret key")
	})
}
