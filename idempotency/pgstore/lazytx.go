package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is the transaction handed to an execution (TxFrom). It takes a
// connection and sends BEGIN only when first used, and then pipelines BEGIN
// with that first statement: an execution that writes nothing locally costs
// no transaction at all, and one that does pays no extra round trip for
// BEGIN. Commit and Rollback return ErrTxOwned: the store ends it.
//
// It keeps the failures of the statements made through it (see failures),
// so that a transaction in which a statement failed is never committed, even
// when the failure never reached the server (a context that ended, no
// connection to be had) and the server's transaction is still healthy. After
// a failure at its top level it refuses every further statement, as
// PostgreSQL refuses them in an aborted transaction: BEGIN may not have run,
// and a statement sent then would commit on its own.
type lazyTx struct {
	pool   *pgxpool.Pool
	conn   *pgxpool.Conn // nil until first use
	begun  bool          // BEGIN was sent (the server may have refused it)
	real   pgx.Tx        // pgx's own handle, made only for savepoints and the like
	closed bool
	// take, if set, gives the transaction its connection instead of the
	// pool, inside a transaction already begun (a batch's member).
	take func(ctx context.Context) (*pgxpool.Conn, error)
	failures
}

// errAborted is what PostgreSQL answers in an aborted transaction.
var errAborted = &pgconn.PgError{Severity: "ERROR", Code: "25P02",
	Message: "current transaction is aborted, commands ignored until end of transaction block"}

var _ pgx.Tx = (*lazyTx)(nil)

// acquire takes the transaction's connection. A failure is recorded.
func (t *lazyTx) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if t.top != nil {
		return nil, fmt.Errorf("%w (after: %w)", errAborted, t.top)
	}
	if t.conn == nil && t.take != nil {
		// A member of a batch: its connection comes with the batch's
		// transaction begun and the member's savepoint set.
		c, err := t.take(ctx)
		if err != nil {
			return nil, t.fail(err)
		}
		t.conn, t.begun = c, true
	}
	if t.conn == nil {
		c, err := t.pool.Acquire(ctx)
		if err != nil {
			return nil, t.fail(err)
		}
		t.conn = c
	}
	return t.conn, nil
}

// begin sends BEGIN on its own, if it was not sent yet. A failure is recorded.
func (t *lazyTx) begin(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := t.acquire(ctx)
	if err != nil || t.begun {
		return c, err
	}
	t.begun = true
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return nil, t.fail(err)
	}
	return c, nil
}

// pgxTx returns pgx's own handle on the open transaction, for the methods
// that need one (savepoints, large objects, COPY, prepared statements,
// batches). Its Commit and Rollback are never called.
func (t *lazyTx) pgxTx(ctx context.Context) (pgx.Tx, error) {
	if t.real != nil {
		return t.real, nil
	}
	c, err := t.acquire(ctx)
	if err != nil {
		return nil, err
	}
	// When BEGIN was already sent, only the handle is needed: a no-op
	// statement stands in for BEGIN.
	opts := pgx.TxOptions{}
	if t.begun {
		opts.BeginQuery = "SELECT 1"
	}
	t.begun = true
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		return nil, t.fail(err)
	}
	t.real = tx
	return tx, nil
}

// pipelinable reports whether a statement with args can be sent in a batch
// after BEGIN (a batch takes no per-query execution options).
func pipelinable(args []any) bool {
	if len(args) == 0 {
		return true
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
		return false
	}
	return true
}

// Exec runs sql in the transaction; the first statement carries BEGIN with it.
func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := t.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	switch {
	case t.begun:
		tag, err := c.Exec(ctx, sql, args...)
		return tag, t.fail(err)
	case len(args) == 0:
		// The simple protocol takes several statements in one message.
		t.begun = true
		tag, err := c.Exec(ctx, "BEGIN;\n"+sql)
		return tag, t.fail(err)
	case !pipelinable(args):
		if _, err := t.begin(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		tag, err := c.Exec(ctx, sql, args...)
		return tag, t.fail(err)
	}
	t.begun = true
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sql, args...)
	br := c.SendBatch(ctx, b)
	_, errBegin := br.Exec()
	tag, err := br.Exec()
	return tag, t.fail(errors.Join(errBegin, err, br.Close()))
}

// Query runs sql in the transaction; the first statement carries BEGIN with it.
func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := t.acquire(ctx)
	if err != nil {
		return errRows{err}, err
	}
	if t.begun || !pipelinable(args) {
		if _, err := t.begin(ctx); err != nil {
			return errRows{err}, err
		}
		rows, err := c.Query(ctx, sql, args...)
		if err != nil {
			return errRows{err}, t.fail(err)
		}
		return &trackedRows{Rows: rows, f: &t.failures}, nil
	}
	t.begun = true
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sql, args...)
	br := c.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		err = t.fail(errors.Join(err, br.Close()))
		return errRows{err}, err
	}
	rows, err := br.Query()
	if err != nil {
		err = t.fail(errors.Join(err, br.Close()))
		return errRows{err}, err
	}
	return &trackedRows{Rows: &batchRows{Rows: rows, br: br}, f: &t.failures}, nil
}

// QueryRow runs sql in the transaction and returns its one row.
func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &oneRow{rows: rows, err: err}
}

// Begin starts a nested transaction (a savepoint). A statement that fails
// in it fails the whole transaction, unless the savepoint is rolled back.
func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.pgxTx(ctx)
	if err != nil {
		return nil, err
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, t.fail(err)
	}
	depth, id := t.open()
	return &savepoint{Tx: sp, f: &t.failures, depth: depth, id: id}, nil
}

// CopyFrom copies rows into a table in the transaction.
func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.pgxTx(ctx)
	if err != nil {
		return 0, err
	}
	n, err := tx.CopyFrom(ctx, table, columns, src)
	return n, t.fail(err)
}

// SendBatch sends a batch in the transaction.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := t.pgxTx(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return &trackedBatch{BatchResults: tx.SendBatch(ctx, b), f: &t.failures}
}

// Prepare prepares a statement on the transaction's connection.
func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := t.pgxTx(ctx)
	if err != nil {
		return nil, err
	}
	sd, err := tx.Prepare(ctx, name, sql)
	return sd, t.fail(err)
}

// LargeObjects returns the large objects of the transaction. It begins the
// transaction without a context; if that fails it panics, as there is no
// error to return. Failures of its calls are not seen by the store (one the
// server reported still keeps the transaction from committing).
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.pgxTx(context.Background())
	if err != nil {
		panic(fmt.Sprintf("pgstore: begin for large objects: %v", err))
	}
	return tx.LargeObjects()
}

// Conn returns the connection the transaction runs on, after beginning it
// (without a context; nil if that fails). Failures of statements sent
// through it are not seen by the store (one the server reported still keeps
// the transaction from committing): use the transaction itself.
func (t *lazyTx) Conn() *pgx.Conn {
	tx, err := t.pgxTx(context.Background())
	if err != nil {
		return nil
	}
	return tx.Conn()
}

// Commit returns ErrTxOwned: Tx.Complete commits.
func (t *lazyTx) Commit(context.Context) error { return ErrTxOwned }

// Rollback returns ErrTxOwned: Tx.Rollback rolls back.
func (t *lazyTx) Rollback(context.Context) error { return ErrTxOwned }

// batchRows are the rows of the statement pipelined after BEGIN; closing
// them closes the batch.
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closed   bool
	closeErr error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.closeErr = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

// errRows are rows that failed before the query ran.
type errRows struct{ err error }

func (errRows) Close()                                       {}
func (r errRows) Err() error                                 { return r.err }
func (errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                          { return r.err }
func (r errRows) Values() ([]any, error)                     { return nil, r.err }
func (errRows) RawValues() [][]byte                          { return nil }
func (errRows) Conn() *pgx.Conn                              { return nil }
func (errRows) TypeMap() *pgtype.Map                         { return nil }

// oneRow is the row of QueryRow, with pgx's semantics: ErrNoRows when there
// is none, the first row otherwise.
type oneRow struct {
	rows pgx.Rows
	err  error
}

func (r *oneRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
