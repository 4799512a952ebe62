package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openTx claims key and opens its completion transaction.
func openTx(t *testing.T, s *pgstore.Store, key string) (idempotency.Tx, context.Context, pgx.Tx) {
	t.Helper()
	r := mustClaim(t, s, claimReq(key), idempotency.ClaimCreated)
	tx, err := s.Begin(context.Background(), fenceOf(r))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	ctx := tx.Context(context.Background())
	return tx, ctx, mustTx(t, ctx)
}

// Every kind of first statement starts the transaction: its writes commit
// with Complete and vanish with Rollback.
func TestLazyTxFirstStatements(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	lw := table(schema, "local_writes")
	first := map[string]func(ctx context.Context, tx pgx.Tx, name string) error{
		"Exec": func(ctx context.Context, tx pgx.Tx, name string) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+lw+" (name) VALUES ($1)", name)
			return err
		},
		"ExecNoArgs": func(ctx context.Context, tx pgx.Tx, name string) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+lw+" (name) VALUES ('"+name+"'); UPDATE "+lw+" SET n = 2")
			return err
		},
		"ExecWithMode": func(ctx context.Context, tx pgx.Tx, name string) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+lw+" (name) VALUES ($1)", pgx.QueryExecModeSimpleProtocol, name)
			return err
		},
		"Query": func(ctx context.Context, tx pgx.Tx, name string) error {
			rows, err := tx.Query(ctx, "INSERT INTO "+lw+" (name) VALUES ($1) RETURNING name", name)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err == nil && (len(got) != 1 || got[0] != name) {
				err = testError("unexpected rows")
			}
			return err
		},
		"QueryRow": func(ctx context.Context, tx pgx.Tx, name string) error {
			var got string
			return tx.QueryRow(ctx, "INSERT INTO "+lw+" (name) VALUES ($1) RETURNING name", name).Scan(&got)
		},
		"Savepoint": func(ctx context.Context, tx pgx.Tx, name string) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := sp.Exec(ctx, "INSERT INTO "+lw+" (name) VALUES ($1)", name); err != nil {
				return err
			}
			return sp.Commit(ctx)
		},
		"SendBatch": func(ctx context.Context, tx pgx.Tx, name string) error {
			b := &pgx.Batch{}
			b.Queue("INSERT INTO "+lw+" (name) VALUES ($1)", name)
			return tx.SendBatch(ctx, b).Close()
		},
		"CopyFrom": func(ctx context.Context, tx pgx.Tx, name string) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{schema, "local_writes"}, []string{"name"}, pgx.CopyFromRows([][]any{{name}}))
			return err
		},
		"Conn": func(ctx context.Context, tx pgx.Tx, name string) error {
			_, err := tx.Conn().Exec(ctx, "INSERT INTO "+lw+" (name) VALUES ($1)", name)
			return err
		},
	}
	for how, write := range first {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			tx, txCtx, ptx := openTx(t, s, how+"-commit")
			require.NoError(t, write(txCtx, ptx, how+"-commit"))
			// A second statement runs in the same transaction, and so does a
			// savepoint after it.
			require.NoError(t, localWrite(txCtx, schema, how+"-second"))
			sp, err := ptx.Begin(txCtx)
			require.NoError(t, err)
			_, err = sp.Exec(txCtx, "INSERT INTO "+lw+" (name) VALUES ($1)", how+"-undone")
			require.NoError(t, err)
			require.NoError(t, sp.Rollback(txCtx))
			assert.False(t, written(t, s.Pool(), schema, how+"-commit"), "visible before commit")
			require.NoError(t, tx.Complete(ctx, []byte("ok")))
			assert.True(t, written(t, s.Pool(), schema, how+"-commit"))
			assert.True(t, written(t, s.Pool(), schema, how+"-second"))
			assert.False(t, written(t, s.Pool(), schema, how+"-undone"))

			tx, txCtx, ptx = openTx(t, s, how+"-rollback")
			require.NoError(t, write(txCtx, ptx, how+"-rollback"))
			require.NoError(t, tx.Rollback(ctx))
			assert.False(t, written(t, s.Pool(), schema, how+"-rollback"))
		})
	}
}

// A first statement that fails leaves the transaction aborted: Complete
// fails, stores nothing, and the connection goes back to the pool clean.
func TestLazyTxFailedFirstStatement(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	for _, how := range []string{"Exec", "QueryRow"} {
		tx, txCtx, ptx := openTx(t, s, how)
		var err error
		if how == "Exec" {
			_, err = ptx.Exec(txCtx, "INSERT INTO "+table(schema, "nope")+" VALUES ($1)", 1)
		} else {
			var n int
			err = ptx.QueryRow(txCtx, "SELECT 1/$1::int", 0).Scan(&n)
		}
		require.Error(t, err)
		err = tx.Complete(ctx, []byte("x"))
		require.Error(t, err)
		assert.NotErrorIs(t, err, idempotency.ErrLeaseLost)
		g, err := s.Get(ctx, "alice", how)
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateInProgress, g.State)
	}
	// The pool still works.
	require.NoError(t, s.Pool().Ping(ctx))
}

// QueryRow with no row reports pgx.ErrNoRows, and the transaction goes on.
func TestLazyTxQueryRowNoRows(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	tx, txCtx, ptx := openTx(t, s, "k")
	var name string
	err := ptx.QueryRow(txCtx, "SELECT name FROM "+table(schema, "local_writes")+" WHERE name = $1", "none").Scan(&name)
	require.ErrorIs(t, err, pgx.ErrNoRows)
	require.NoError(t, localWrite(txCtx, schema, "after"))
	require.NoError(t, tx.Complete(context.Background(), []byte("ok")))
	assert.True(t, written(t, s.Pool(), schema, "after"))
}

// Every way of making a statement through the transaction records its
// failure, including failures that never reach the server: the transaction
// then reports it (Err), refuses further statements at its top level, and
// Complete commits nothing, not even the writes made before.
func TestLazyTxEveryFailureCounts(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	lw := table(schema, "local_writes")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	fails := map[string]func(ctx context.Context, tx pgx.Tx) error{
		"Exec": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT 1/0")
			return err
		},
		"Exec on a done context": func(_ context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(done, "INSERT INTO "+lw+" (name) VALUES ($1)", "never")
			return err
		},
		"Query": func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT 1/(2-g) FROM generate_series(1, 3) g")
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			rows.Close()
			return rows.Err()
		},
		"QueryRow scan": func(ctx context.Context, tx pgx.Tx) error {
			var b bool
			return tx.QueryRow(ctx, "SELECT 'not a bool'::text").Scan(&b)
		},
		"SendBatch": func(ctx context.Context, tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue("SELECT 1/0")
			return tx.SendBatch(ctx, b).Close()
		},
		"CopyFrom": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{schema, "nope"}, []string{"name"}, pgx.CopyFromRows([][]any{{"x"}}))
			return err
		},
		"Prepare": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Prepare(ctx, "bad", "SELEC 1")
			return err
		},
		"savepoint left open": func(ctx context.Context, tx pgx.Tx) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			_, err = sp.Exec(done, "INSERT INTO "+lw+" (name) VALUES ($1)", "never")
			return err
		},
		"savepoint released": func(ctx context.Context, tx pgx.Tx) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			inner, err := sp.Begin(ctx)
			if err != nil {
				return err
			}
			_, ferr := inner.Exec(done, "INSERT INTO "+lw+" (name) VALUES ($1)", "never")
			if err := inner.Commit(ctx); err != nil {
				return err
			}
			if err := sp.Commit(ctx); err != nil {
				return err
			}
			return ferr
		},
	}
	for how, fail := range fails {
		for _, first := range []bool{true, false} {
			key := fmt.Sprint(how, "-first-", first)
			t.Run(key, func(t *testing.T) {
				tx, txCtx, ptx := openTx(t, s, key)
				if !first {
					require.NoError(t, localWrite(txCtx, schema, key))
				}
				require.Error(t, fail(txCtx, ptx))
				require.Error(t, tx.Err())
				// Further statements are refused, unless the failure is in a
				// savepoint still open (which a rollback may undo).
				if err := localWrite(txCtx, schema, key+"-after"); how != "savepoint left open" {
					require.Error(t, err)
				}
				require.ErrorIs(t, tx.Complete(context.Background(), []byte("x")), idempotency.ErrTxFailed)
				assert.False(t, written(t, s.Pool(), schema, key))
				assert.False(t, written(t, s.Pool(), schema, key+"-after"))
				g, err := s.Get(context.Background(), "alice", key)
				require.NoError(t, err)
				assert.Equal(t, idempotency.StateInProgress, g.State)
			})
		}
	}
}

// What is not a failure: no row (an answer), a savepoint rolled back after a
// failure in it (PostgreSQL's way to recover), Rollback after Commit of a
// savepoint.
func TestLazyTxRecoveredFailures(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	lw := table(schema, "local_writes")
	tx, txCtx, ptx := openTx(t, s, "k")
	var name string
	require.ErrorIs(t, ptx.QueryRow(txCtx, "SELECT name FROM "+lw+" WHERE name = 'none'").Scan(&name), pgx.ErrNoRows)
	require.NoError(t, tx.Err())
	require.NoError(t, localWrite(txCtx, schema, "kept"))
	for _, stmt := range []string{"INSERT INTO " + lw + " (name) VALUES ('kept')", "SELECT 1/0"} {
		sp, err := ptx.Begin(txCtx)
		require.NoError(t, err)
		inner, err := sp.Begin(txCtx)
		require.NoError(t, err)
		_, err = inner.Exec(txCtx, stmt)
		require.Error(t, err)
		require.Error(t, tx.Err(), "a failure in an open savepoint counts")
		require.NoError(t, sp.Rollback(txCtx), "rolling back the outer savepoint undoes the inner one")
		require.ErrorIs(t, inner.Rollback(txCtx), pgx.ErrTxClosed)
		require.NoError(t, tx.Err())
	}
	sp, err := ptx.Begin(txCtx)
	require.NoError(t, err)
	_, err = sp.Exec(txCtx, "INSERT INTO "+lw+" (name) VALUES ('released')")
	require.NoError(t, err)
	require.NoError(t, sp.Commit(txCtx))
	require.ErrorIs(t, sp.Rollback(txCtx), pgx.ErrTxClosed, "the usual deferred Rollback after Commit")
	require.NoError(t, tx.Err())
	require.NoError(t, tx.Complete(context.Background(), []byte("ok")))
	assert.True(t, written(t, s.Pool(), schema, "kept"))
	assert.True(t, written(t, s.Pool(), schema, "released"))
}
