package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// failures keeps the first failure of the statements of a lazyTx, at its top
// level and in each of its savepoints that is still open, so that a
// transaction in which a statement failed is never committed. A failure in
// a savepoint is undone when the savepoint is rolled back (as PostgreSQL
// undoes it), and becomes its parent's when the savepoint is released or
// cannot be rolled back. A statement runs in the innermost open savepoint,
// whichever handle sent it, as on the server.
type failures struct {
	top    error   // at the top level, or from a savepoint released into it
	nested []level // nested[d-1]: the open savepoint at depth d
	opened uint64  // savepoints opened so far, for their ids
}

// level is an open savepoint: its id and its first failure.
type level struct {
	id  uint64
	err error
}

// depth is the depth statements run at now: that of the innermost open
// savepoint, 0 for none.
func (f *failures) depth() int { return len(f.nested) }

// fail records err, from a statement at the current depth, and returns it
// unchanged. pgx.ErrNoRows is an answer, not a failure.
func (f *failures) fail(err error) error {
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	f.record(f.depth(), classify(err))
	return err
}

func (f *failures) record(depth int, err error) {
	switch {
	case depth <= 0:
		if f.top == nil {
			f.top = err
		}
	case f.nested[depth-1].err == nil:
		f.nested[depth-1].err = err
	}
}

// open opens a savepoint and returns its depth and id.
func (f *failures) open() (depth int, id uint64) {
	f.opened++
	f.nested = append(f.nested, level{id: f.opened})
	return len(f.nested), f.opened
}

// alive reports whether the savepoint (depth, id) is still open: closing a
// savepoint closes those opened inside it too.
func (f *failures) alive(depth int, id uint64) bool {
	return depth >= 1 && depth <= len(f.nested) && f.nested[depth-1].id == id
}

// close closes the savepoint at depth and any opened inside it: released,
// their failures become the parent's; rolled back, they are undone.
func (f *failures) close(depth int, released bool) {
	if depth < 1 || depth > len(f.nested) {
		return
	}
	var first error
	for _, l := range f.nested[depth-1:] {
		if l.err != nil {
			first = l.err
			break
		}
	}
	clear(f.nested[depth-1:])
	f.nested = f.nested[:depth-1]
	if released && first != nil {
		f.record(depth-1, first)
	}
}

// err returns the first failure not undone, or nil.
func (f *failures) err() error {
	if f.top != nil {
		return f.top
	}
	for _, l := range f.nested {
		if l.err != nil {
			return l.err
		}
	}
	return nil
}

// savepoint is a savepoint of a lazyTx (pgx's own handle on it) whose
// statements' failures are recorded. Once it is closed, or a savepoint it is
// inside was, its statements fail with pgx.ErrTxClosed, and its Commit and
// Rollback return pgx.ErrTxClosed and do nothing.
type savepoint struct {
	pgx.Tx
	f     *failures
	depth int
	id    uint64
}

// closed returns pgx.ErrTxClosed when the savepoint is no longer open.
func (s *savepoint) closed() error {
	if !s.f.alive(s.depth, s.id) {
		return pgx.ErrTxClosed
	}
	return nil
}

// Begin starts a savepoint inside this one.
func (s *savepoint) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := s.closed(); err != nil {
		return nil, s.f.fail(err)
	}
	sp, err := s.Tx.Begin(ctx)
	if err != nil {
		return nil, s.f.fail(err)
	}
	depth, id := s.f.open()
	return &savepoint{Tx: sp, f: s.f, depth: depth, id: id}, nil
}

// Commit releases the savepoint; its failures become its parent's.
func (s *savepoint) Commit(ctx context.Context) error {
	if err := s.closed(); err != nil {
		return err
	}
	err := s.Tx.Commit(ctx)
	if err != nil {
		s.f.record(s.depth, classify(err))
	}
	s.f.close(s.depth, true)
	return err
}

// Rollback rolls back to the savepoint, undoing its failures; if that fails,
// they stay.
func (s *savepoint) Rollback(ctx context.Context) error {
	if err := s.closed(); err != nil {
		return err
	}
	if err := s.Tx.Rollback(ctx); err != nil {
		s.f.record(s.depth, classify(err))
		s.f.close(s.depth, true)
		return err
	}
	s.f.close(s.depth, false)
	return nil
}

// Exec runs sql in the savepoint.
func (s *savepoint) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := s.closed(); err != nil {
		return pgconn.CommandTag{}, s.f.fail(err)
	}
	tag, err := s.Tx.Exec(ctx, sql, args...)
	return tag, s.f.fail(err)
}

// Query runs sql in the savepoint.
func (s *savepoint) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := s.closed(); err != nil {
		return errRows{err}, s.f.fail(err)
	}
	rows, err := s.Tx.Query(ctx, sql, args...)
	if err != nil {
		return rows, s.f.fail(err)
	}
	return &trackedRows{Rows: rows, f: s.f}, nil
}

// QueryRow runs sql in the savepoint and returns its one row.
func (s *savepoint) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := s.Query(ctx, sql, args...)
	return &oneRow{rows: rows, err: err}
}

// CopyFrom copies rows into a table in the savepoint.
func (s *savepoint) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := s.closed(); err != nil {
		return 0, s.f.fail(err)
	}
	n, err := s.Tx.CopyFrom(ctx, table, columns, src)
	return n, s.f.fail(err)
}

// SendBatch sends a batch in the savepoint.
func (s *savepoint) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := s.closed(); err != nil {
		return pgx.FailedBatchResults(b, s.f.fail(err))
	}
	return &trackedBatch{BatchResults: s.Tx.SendBatch(ctx, b), f: s.f}
}

// Prepare prepares a statement on the transaction's connection.
func (s *savepoint) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := s.closed(); err != nil {
		return nil, s.f.fail(err)
	}
	sd, err := s.Tx.Prepare(ctx, name, sql)
	return sd, s.f.fail(err)
}

// trackedRows are rows whose failures (reading, scanning) are recorded.
type trackedRows struct {
	pgx.Rows
	f *failures
}

func (r *trackedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	_ = r.f.fail(r.Rows.Err())
	return false
}

func (r *trackedRows) Scan(dest ...any) error { return r.f.fail(r.Rows.Scan(dest...)) }

func (r *trackedRows) Values() ([]any, error) {
	v, err := r.Rows.Values()
	return v, r.f.fail(err)
}

func (r *trackedRows) Close() {
	r.Rows.Close()
	_ = r.f.fail(r.Rows.Err())
}

func (r *trackedRows) Err() error { return r.f.fail(r.Rows.Err()) }

// trackedBatch are batch results whose failures are recorded.
type trackedBatch struct {
	pgx.BatchResults
	f *failures
}

func (b *trackedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.f.fail(err)
}

func (b *trackedBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return rows, b.f.fail(err)
	}
	return &trackedRows{Rows: rows, f: b.f}, nil
}

func (b *trackedBatch) QueryRow() pgx.Row {
	return trackedRow{row: b.BatchResults.QueryRow(), f: b.f}
}

func (b *trackedBatch) Close() error { return b.f.fail(b.BatchResults.Close()) }

// trackedRow is a row whose failure is recorded.
type trackedRow struct {
	row pgx.Row
	f   *failures
}

func (r trackedRow) Scan(dest ...any) error { return r.f.fail(r.row.Scan(dest...)) }
