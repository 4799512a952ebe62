package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// ErrTxOwned; savepoints (Begin) work as usual. It is for the goroutine
// running the execution, like any pgx.Tx.
//
// The transaction starts lazily: its first statement takes a connection and
// carries BEGIN with it in the same round trip. An execution that never uses
// it completes with a single autocommit update.
//
// If a statement made through it fails, for whatever reason, the
// transaction never commits (see the package documentation): the handler
// need not, and cannot, roll it back itself.
func TxFrom(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Begin opens the completion transaction for the execution fenced by f. It
// sends nothing to the server: see TxFrom. End it with Complete or Rollback.
func (s *Store) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	return &completionTx{s: s, f: f, tx: &lazyTx{pool: s.pool}}, nil
}

// completionTx implements idempotency.Tx. It is used by one goroutine at a time.
type completionTx struct {
	s  *Store
	f  idempotency.Fence
	tx *lazyTx
}

// Context returns ctx carrying the transaction; take it out with TxFrom.
func (t *completionTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, pgx.Tx(t.tx))
}

// Err returns the first failure of a statement made through the
// transaction (TxFrom), or nil: one the server reported, or one that never
// reached it (a context that ended, no connection to be had). A failure in a
// savepoint that was rolled back does not count.
func (t *completionTx) Err() error { return t.tx.err() }

// Complete stores response, conditional on the fence, and commits. When the
// transaction was used, the fenced update and the COMMIT go to the server in
// one round trip; when the fence no longer holds, the update raises an error,
// the COMMIT never runs, everything in the transaction is rolled back, and
// Complete returns idempotency.ErrLeaseLost. When it was never used, Complete
// is one autocommit fenced update. When a statement of the transaction
// failed (Err), Complete rolls back, stores nothing and returns an error
// matching idempotency.ErrTxFailed.
func (t *completionTx) Complete(ctx context.Context, response []byte) error {
	if t.tx.closed {
		return pgx.ErrTxClosed
	}
	if err := t.tx.err(); err != nil {
		rerr := t.end(ctx, true)
		return errors.Join(fmt.Errorf("pgstore: complete: %w: %w", idempotency.ErrTxFailed, err), rerr)
	}
	if !t.tx.begun {
		t.end(ctx, false)
		return t.s.Complete(ctx, t.f, response)
	}
	b := &pgx.Batch{}
	b.Queue(t.s.q.completeTx, []byte(t.f.Caller), []byte(t.f.Key), t.f.Attempt, response, t.f.Generation, t.s.now())
	b.Queue("COMMIT")
	br := t.tx.conn.SendBatch(ctx, b)
	_, errUpdate := br.Exec()
	tag, errCommit := br.Exec()
	errClose := br.Close()
	if err := errors.Join(errUpdate, errCommit, errClose); err != nil {
		if rerr := t.end(ctx, true); rerr != nil {
			err = errors.Join(err, rerr)
		}
		var pgErr *pgconn.PgError
		switch {
		case errors.As(errUpdate, &pgErr) && pgErr.Code == leaseLostCode:
			return idempotency.ErrLeaseLost
		case errors.As(errUpdate, &pgErr) && pgErr.Code == errAborted.Code:
			// A statement failed where the store could not see it (on
			// Conn, say): the server aborted the transaction.
			return fmt.Errorf("pgstore: complete: %w: %w", idempotency.ErrTxFailed, err)
		}
		return fmt.Errorf("pgstore: complete: %w", classify(err))
	}
	t.end(ctx, false)
	if tag.String() == "ROLLBACK" { // the transaction had already failed
		return fmt.Errorf("pgstore: complete: %w: %w", idempotency.ErrTxFailed, pgx.ErrTxCommitRollback)
	}
	return nil
}

// Rollback abandons the transaction; it is a no-op once the transaction ended.
func (t *completionTx) Rollback(ctx context.Context) error {
	if t.tx.closed {
		return nil
	}
	return t.end(ctx, true)
}

// end closes the transaction: optionally rolls back, then returns the
// connection to the pool (which discards it if it is still inside a
// transaction).
func (t *completionTx) end(ctx context.Context, rollback bool) error {
	lt := t.tx
	lt.closed = true
	conn := lt.conn
	lt.conn = nil
	if conn == nil {
		return nil
	}
	defer conn.Release()
	if rollback && conn.Conn().PgConn().TxStatus() != 'I' {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			return fmt.Errorf("pgstore: rollback: %w", err)
		}
	}
	return nil
}

// Touched reports whether the execution used the transaction: a statement
// was made through it, or failed to be. An untouched one's outcome may be
// stored with other executions' (idempotency's group commit).
func (t *completionTx) Touched() bool { return t.tx.begun || t.tx.err() != nil }
