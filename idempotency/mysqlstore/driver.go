package mysqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"reflect"
	"sync"
)

// The store opens its connections through trackingConnector, which wraps the
// MySQL driver's connections to see every statement's failure, however it
// was made (Exec, Query, a prepared statement, an error that arrives while
// rows are read). While a completion transaction holds a connection, the
// first failure ends what the connection takes: every later statement is
// refused before it reaches the server. MySQL answers some errors by rolling
// back the failed statement alone (a duplicate key, a lock wait timeout) and
// others by rolling back the whole transaction and leaving the session in
// autocommit (a deadlock), and after a lost connection nothing is left of
// it; a statement sent after any of them would commit on its own, or with
// what came before. The transaction checks its connection's failures before
// it commits, and rolls back instead.

// trackingConnector makes trackedConns.
type trackingConnector struct {
	inner driver.Connector
}

func (c trackingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: dc}, nil
}

func (c trackingConnector) Driver() driver.Driver { return c.inner.Driver() }

// trackedConn is a driver connection that keeps the first failure of a
// statement since arm, and refuses statements after it until disarm.
type trackedConn struct {
	driver.Conn
	mu     sync.Mutex
	failed error
	armed  bool // a completion transaction holds the connection
}

// fail records err, unless it is nil or the end of rows.
func (c *trackedConn) fail(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	c.mu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	c.mu.Unlock()
	return err
}

// arm forgets the failures so far and, from the next failure on, refuses
// every statement: a completion transaction took the connection.
func (c *trackedConn) arm() {
	c.mu.Lock()
	c.failed, c.armed = nil, true
	c.mu.Unlock()
}

// disarm lets the connection take statements again: the transaction ended.
func (c *trackedConn) disarm() {
	c.mu.Lock()
	c.failed, c.armed = nil, false
	c.mu.Unlock()
}

// refusal returns the error for a statement made on an armed connection
// after a failure, or nil when the statement may go to the server.
func (c *trackedConn) refusal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed || c.failed == nil {
		return nil
	}
	return &abortedError{first: c.failed}
}

// failure returns the first failure since reset, or nil.
func (c *trackedConn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

var (
	_ driver.ConnBeginTx            = (*trackedConn)(nil)
	_ driver.ConnPrepareContext     = (*trackedConn)(nil)
	_ driver.ExecerContext          = (*trackedConn)(nil)
	_ driver.QueryerContext         = (*trackedConn)(nil)
	_ driver.Pinger                 = (*trackedConn)(nil)
	_ driver.SessionResetter        = (*trackedConn)(nil)
	_ driver.Validator              = (*trackedConn)(nil)
	_ driver.NamedValueChecker      = (*trackedConn)(nil)
	_ driver.RowsNextResultSet      = (*trackedRows)(nil)
	_ driver.StmtExecContext        = (*trackedStmt)(nil)
	_ driver.StmtQueryContext       = (*trackedStmt)(nil)
	_ driver.RowsColumnTypeScanType = (*trackedRows)(nil)
)

func (c *trackedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	return tx, c.fail(err)
}

func (c *trackedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.refusal(); err != nil {
		return nil, err
	}
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, c.fail(err)
	}
	return &trackedStmt{Stmt: st, c: c}, nil
}

func (c *trackedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.refusal(); err != nil {
		return nil, err
	}
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err // database/sql prepares the statement instead
	}
	return res, c.fail(err)
}

func (c *trackedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.refusal(); err != nil {
		return nil, err
	}
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err
	}
	if err != nil {
		return nil, c.fail(err)
	}
	return &trackedRows{Rows: rows, c: c}, nil
}

func (c *trackedConn) Ping(ctx context.Context) error {
	return c.Conn.(driver.Pinger).Ping(ctx)
}

func (c *trackedConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *trackedConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *trackedConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// trackedStmt is a prepared statement whose failures are recorded.
type trackedStmt struct {
	driver.Stmt
	c *trackedConn
}

func (s *trackedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.c.refusal(); err != nil {
		return nil, err
	}
	res, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	return res, s.c.fail(err)
}

func (s *trackedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.c.refusal(); err != nil {
		return nil, err
	}
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, s.c.fail(err)
	}
	return &trackedRows{Rows: rows, c: s.c}, nil
}

func (s *trackedStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if nvc, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return nvc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// trackedRows are rows whose failures (an error that ends them) are recorded.
type trackedRows struct {
	driver.Rows
	c *trackedConn
}

func (r *trackedRows) Next(dest []driver.Value) error { return r.c.fail(r.Rows.Next(dest)) }

func (r *trackedRows) Close() error { return r.c.fail(r.Rows.Close()) }

func (r *trackedRows) HasNextResultSet() bool {
	nrs, ok := r.Rows.(driver.RowsNextResultSet)
	return ok && nrs.HasNextResultSet()
}

func (r *trackedRows) NextResultSet() error {
	nrs, ok := r.Rows.(driver.RowsNextResultSet)
	if !ok {
		return io.EOF
	}
	return r.c.fail(nrs.NextResultSet())
}

func (r *trackedRows) ColumnTypeScanType(i int) reflect.Type {
	if st, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return st.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *trackedRows) ColumnTypeDatabaseTypeName(i int) string {
	if n, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return n.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *trackedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if n, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return n.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *trackedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if n, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return n.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
