package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// leaseLostCode is the SQLSTATE raised by require_fence (see schema.sql).
const leaseLostCode = "EO001"

// ErrTxOwned is returned by Commit and Rollback of the transaction handed out
// by TxFrom: the store owns that transaction and ends it in Tx.Complete or
// Tx.Rollback.
var ErrTxOwned = errors.New("pgstore: the transaction is owned by the idempotency store; end it with Tx.Complete or Tx.Rollback")

type txKey struct{}

// TxFrom returns the transaction that Tx.Context put into ctx. A handler or a
// core-API caller does its local writes through it, so they commit together
// with the stored response, or not at all. Its Commit and Rollback return
// ErrTxOwned; savepoints (Begin) work as usual.
func TxFrom(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Begin opens the completion transaction for the execution fenced by f on a
// connection of its own. End it with Complete or Rollback.
func (s *Store) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Release()
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	return &completionTx{s: s, f: f, conn: conn, tx: ownedTx{tx}}, nil
}

// completionTx implements idempotency.Tx. It is used by one goroutine at a time.
type completionTx struct {
	s    *Store
	f    idempotency.Fence
	conn *pgxpool.Conn // nil once ended
	tx   ownedTx
}

// Context returns ctx carrying the transaction; take it out with TxFrom.
func (t *completionTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, pgx.Tx(t.tx))
}

// Complete stores response, conditional on the fence, and commits: the fenced
// update and the COMMIT go to the server in one round trip. When the fence no
// longer holds the update raises an error, the COMMIT never runs, everything
// in the transaction is rolled back, and Complete returns
// idempotency.ErrLeaseLost.
func (t *completionTx) Complete(ctx context.Context, response []byte) error {
	if t.conn == nil {
		return pgx.ErrTxClosed
	}
	b := &pgx.Batch{}
	b.Queue(t.s.q.completeTx, []byte(t.f.Caller), []byte(t.f.Key), t.f.Attempt, response, t.s.now())
	b.Queue("COMMIT")
	br := t.conn.SendBatch(ctx, b)
	_, errUpdate := br.Exec()
	tag, errCommit := br.Exec()
	errClose := br.Close()
	if err := errors.Join(errUpdate, errCommit, errClose); err != nil {
		_ = t.end(ctx, true)
		var pgErr *pgconn.PgError
		if errors.As(errUpdate, &pgErr) && pgErr.Code == leaseLostCode {
			return idempotency.ErrLeaseLost
		}
		return fmt.Errorf("pgstore: complete: %w", err)
	}
	if tag.String() == "ROLLBACK" { // the transaction had already failed
		_ = t.end(ctx, false)
		return fmt.Errorf("pgstore: complete: %w", pgx.ErrTxCommitRollback)
	}
	return t.end(ctx, false)
}

// Rollback abandons the transaction; it is a no-op once the transaction ended.
func (t *completionTx) Rollback(ctx context.Context) error {
	if t.conn == nil {
		return nil
	}
	return t.end(ctx, true)
}

// end optionally rolls back, then returns the connection to the pool (which
// discards it if it is still inside a transaction).
func (t *completionTx) end(ctx context.Context, rollback bool) error {
	conn := t.conn
	t.conn = nil
	defer conn.Release()
	if rollback && conn.Conn().PgConn().TxStatus() != 'I' {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			return fmt.Errorf("pgstore: rollback: %w", err)
		}
	}
	return nil
}

// ownedTx is the transaction as handed to the execution: everything but
// ending it.
type ownedTx struct{ pgx.Tx }

// Commit returns ErrTxOwned.
func (ownedTx) Commit(context.Context) error { return ErrTxOwned }

// Rollback returns ErrTxOwned.
func (ownedTx) Rollback(context.Context) error { return ErrTxOwned }
