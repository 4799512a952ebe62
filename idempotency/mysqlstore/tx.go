package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/exactlyonce/retry/idempotency"
)

type txKey struct{}

// Tx is the completion transaction of an execution, for its local writes:
// take it out of the execution's context with TxFrom. Its statements commit
// together with the stored response, in Tx.Complete of the idempotency.Tx
// that Begin made, or not at all. It has the statement methods of
// *sql.Tx (so code written for an interface of *sql.DB and *sql.Tx takes it)
// but no Commit or Rollback: the store ends it. It is for the goroutine
// running the execution, like any *sql.Tx.
//
// The transaction starts lazily: its first statement takes a connection of
// the store's pool and begins it. An execution that never uses it completes
// with a single autocommit UPDATE.
//
// A transaction in which a statement failed is never committed, not even in
// part, and takes no more statements. MySQL answers some errors by rolling
// back the failed statement alone and letting the transaction go on (a
// duplicate key, a lock wait timeout), so a COMMIT would keep the statements
// that worked; others end the whole transaction (InnoDB rolls back a
// deadlock's victim and leaves the session in autocommit, a lost connection
// takes the transaction with it), so a statement sent after them would
// commit on its own at once. The store cannot always tell which happened,
// so it treats every failure alike: it records the failure of every
// statement made on the transaction's connection (through these methods, a
// prepared statement, or rows that end in an error), and of those that
// never reached the server (a context that had ended, no connection to be
// had); from then on every statement of the transaction fails at once,
// without reaching the server, with an error matching
// idempotency.ErrTxFailed, and Complete rolls back. To tolerate an expected
// error, write a statement that does not fail (INSERT ... ON DUPLICATE KEY
// UPDATE, INSERT IGNORE) rather than catch it.
type Tx struct {
	s      *Store
	conn   *sql.Conn
	tc     *trackedConn
	tx     *sql.Tx
	failed error // the first failure seen through these methods
	rows   []*sql.Rows
	closed bool
}

// TxFrom returns the transaction that the execution's context carries
// (idempotency.Tx.Context put it there).
func TxFrom(ctx context.Context) (*Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*Tx)
	return tx, ok
}

// begin starts the transaction on a connection of its own, if it is not
// started yet. The transaction outlives ctx: the store ends it.
func (t *Tx) begin(ctx context.Context) (*sql.Tx, error) {
	switch {
	case t.closed:
		return nil, sql.ErrTxDone
	case t.failed != nil:
		return nil, &abortedError{first: t.failed}
	case t.tc != nil:
		if err := t.tc.refusal(); err != nil {
			return nil, err
		}
	}
	if t.tx != nil {
		return t.tx, nil
	}
	conn, err := t.s.db.Conn(ctx)
	if err != nil {
		return nil, t.fail(err)
	}
	if err := conn.Raw(func(dc any) error {
		tc, ok := dc.(*trackedConn)
		if !ok {
			return fmt.Errorf("mysqlstore: a connection of type %T", dc)
		}
		tc.arm()
		t.tc = tc
		return nil
	}); err != nil {
		_ = conn.Close()
		return nil, t.fail(err)
	}
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		t.tc.disarm()
		t.tc = nil
		_ = conn.Close()
		return nil, t.fail(err)
	}
	t.conn, t.tx = conn, tx
	return tx, nil
}

// fail records err, the failure of a statement, and returns it unchanged.
// A refusal is not recorded: the failure that caused it was.
func (t *Tx) fail(err error) error {
	var refused *abortedError
	if err != nil && !errors.Is(err, sql.ErrNoRows) && !errors.As(err, &refused) && t.failed == nil {
		t.failed = err
		if t.tc != nil {
			_ = t.tc.fail(err) // one that never reached it: it refuses the next
		}
	}
	return err
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, query, args...)
	return res, t.fail(err)
}

// QueryContext runs a query in the transaction. Close the rows before the
// execution returns.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, t.fail(err)
	}
	t.rows = append(t.rows, rows)
	return rows, nil
}

// QueryRowContext runs a query in the transaction that returns at most one
// row. After a failure, the row's error matches idempotency.ErrTxFailed;
// when the transaction could not even begin, it is the context's
// (context.Canceled), and Err reports why.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	tx, err := t.begin(ctx)
	if err != nil && t.tx != nil && errors.Is(err, idempotency.ErrTxFailed) {
		// The connection refuses the query too, so the row says why.
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	if err != nil {
		done, cancel := context.WithCancel(ctx)
		cancel()
		return t.s.db.QueryRowContext(done, query, args...)
	}
	row := tx.QueryRowContext(ctx, query, args...)
	_ = t.fail(row.Err())
	return row
}

// PrepareContext prepares a statement in the transaction; its executions'
// failures are recorded like any other.
func (t *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	tx, err := t.begin(ctx)
	if err != nil {
		return nil, err
	}
	st, err := tx.PrepareContext(ctx, query)
	return st, t.fail(err)
}

// err returns the first failure of a statement of the transaction, after
// closing the rows it handed out (whose error, if any, counts).
func (t *Tx) err() error {
	for _, r := range t.rows {
		_ = r.Close()
		_ = t.fail(r.Err())
	}
	t.rows = nil
	if t.failed != nil {
		return t.failed
	}
	if t.tc != nil {
		return t.tc.failure()
	}
	return nil
}

// end rolls back the transaction if rollback and it is open, and returns
// its connection to the pool.
func (t *Tx) end(rollback bool) error {
	t.closed = true
	var err error
	if t.tx != nil && rollback {
		err = ignoreDone(t.tx.Rollback())
	}
	if t.tc != nil {
		t.tc.disarm()
	}
	if t.conn != nil {
		_ = t.conn.Close()
	}
	t.tx, t.conn, t.tc = nil, nil, nil
	return err
}

// abortedError refuses a statement of a transaction in which one failed
// before: it matches idempotency.ErrTxFailed and names the first failure.
type abortedError struct{ first error }

func (e *abortedError) Error() string {
	return "mysqlstore: statement refused: a statement of the transaction failed, so it takes no more and will be rolled back (first failure: " + e.first.Error() + ")"
}

func (e *abortedError) Is(target error) bool { return target == idempotency.ErrTxFailed }

// Begin opens the completion transaction for the execution fenced by f. It
// sends nothing to the server: see TxFrom. End it with Complete or Rollback.
func (s *Store) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	return &completionTx{f: f, tx: &Tx{s: s}}, nil
}

// completionTx implements idempotency.Tx.
type completionTx struct {
	f  idempotency.Fence
	tx *Tx
}

// Context returns ctx carrying the transaction; take it out with TxFrom.
func (c *completionTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, c.tx)
}

// Err returns the first failure of a statement of the transaction, or nil.
func (c *completionTx) Err() error { return c.tx.err() }

// Complete stores response, conditional on the fence, and commits. When the
// transaction was used, the fenced UPDATE runs in it and then COMMIT; when
// the UPDATE matches no row the lease was lost: everything rolls back and
// Complete returns idempotency.ErrLeaseLost. When it was never used,
// Complete is one autocommit fenced UPDATE. When a statement of the
// transaction failed (Err), Complete rolls back, stores nothing and returns
// an error matching idempotency.ErrTxFailed.
func (c *completionTx) Complete(ctx context.Context, response []byte) error {
	t := c.tx
	if t.closed {
		return sql.ErrTxDone
	}
	if err := t.err(); err != nil {
		return errors.Join(fmt.Errorf("mysqlstore: complete: %w: %w", idempotency.ErrTxFailed, err), t.end(true))
	}
	if t.tx == nil {
		t.end(false)
		return t.s.Complete(ctx, c.f, response)
	}
	err := fencedResult("complete")(t.tx.ExecContext(ctx, t.s.q.complete, append([]any{nonNil(response)}, t.s.fenceArgs(c.f)...)...))
	if err != nil {
		return errors.Join(err, t.end(true))
	}
	if err := t.tx.Commit(); err != nil {
		t.end(false)
		return fmt.Errorf("mysqlstore: commit: %w", classify(err))
	}
	t.end(false)
	return nil
}

// Rollback abandons the transaction; it is a no-op once it ended.
func (c *completionTx) Rollback(context.Context) error {
	if c.tx.closed {
		return nil
	}
	return c.tx.end(true)
}

// Touched reports whether the execution used the transaction: a statement
// was made through it, or failed to be. An untouched one's outcome may be
// stored with other executions' (idempotency's group commit).
func (c *completionTx) Touched() bool { return c.tx.tx != nil || c.tx.failed != nil }
