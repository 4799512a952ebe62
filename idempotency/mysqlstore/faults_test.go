package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// The fault matrix on MariaDB: real deadlocks, lock wait timeouts and
// serialization failures in the handler's transaction, connections killed
// by the server (KILL CONNECTION), workers killed and paused.
func TestFaults(t *testing.T) {
	t.Parallel()
	storetest.RunFaults(t, func(t *testing.T) (storetest.Harness, storetest.Faults) {
		s, prefix, shift := newStore(t)
		admin, err := mysqlstore.Open(testConfig(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = admin.Close() })
		c := &faultCell{s: s, prefix: prefix, admin: admin.DB()}
		c.setUp(t)
		return storetest.Harness{
			Store:     s,
			Advance:   shift.Advance,
			TxWrite:   func(ctx context.Context, name string) error { return localWrite(ctx, prefix, name) },
			TxWritten: func(t *testing.T, name string) bool { return written(t, s, prefix, name) },
		}, storetest.Faults{Drop: c.drop, Tx: c.tx}
	})
}

// faultCell is one cell's store, with a pool of its own for the other side
// of a deadlock or a lock wait, and for KILL.
type faultCell struct {
	s      *mysqlstore.Store
	prefix string
	admin  *sql.DB
}

// locks is the table whose rows the faults lock: rows 1 to 3.
func (c *faultCell) locks() string { return "`" + c.prefix + "locks`" }

func (c *faultCell) setUp(t *testing.T) {
	ctx := context.Background()
	_, err := c.admin.ExecContext(ctx, "CREATE TABLE "+c.locks()+" (id INT PRIMARY KEY, n INT NOT NULL)")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = c.admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+c.locks()) })
	_, err = c.admin.ExecContext(ctx, "INSERT INTO "+c.locks()+" VALUES (1, 0), (2, 0), (3, 0)")
	require.NoError(t, err)
}

// drop kills, with KILL CONNECTION, the store's idle connections and the
// one of the transaction in ctx if it has begun, and waits until the server
// has closed them.
func (c *faultCell) drop(ctx context.Context, t *testing.T) {
	bg := context.Background()
	var ids []int64
	if tx, ok := mysqlstore.TxFrom(ctx); ok && mysqlstore.TxBegun(tx) {
		var id int64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Errorf("the transaction's connection id: %v", err)
		} else {
			ids = append(ids, id)
		}
	}
	var conns []*sql.Conn
	for range c.s.DB().Stats().Idle {
		conn, err := c.s.DB().Conn(bg)
		if err != nil {
			t.Errorf("an idle connection: %v", err)
			break
		}
		conns = append(conns, conn)
		var id int64
		if err := conn.QueryRowContext(bg, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Errorf("a connection id: %v", err)
			continue
		}
		ids = append(ids, id)
	}
	for _, conn := range conns {
		_ = conn.Close()
	}
	for _, id := range ids {
		if _, err := c.admin.ExecContext(bg, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Errorf("KILL CONNECTION %d: %v", id, err)
		}
	}
	c.waitGone(t, ids)
}

// waitGone polls the process list, bounded, until none of ids is there.
func (c *faultCell) waitGone(t *testing.T, ids []int64) {
	if len(ids) == 0 {
		return
	}
	list := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ids)), ","), "[]")
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		err := c.admin.QueryRowContext(context.Background(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ("+list+")").Scan(&n)
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("connections %s still there 10s after KILL (%v)", list, err)
			return
		}
		<-tick.C
	}
}

// tx makes a statement of the transaction in ctx fail with the server's own
// error for fault.
func (c *faultCell) tx(ctx context.Context, t *testing.T, fault storetest.Fault) error {
	tx, ok := mysqlstore.TxFrom(ctx)
	if !ok {
		return errNoTx
	}
	var (
		err  error
		want uint16
	)
	switch fault {
	case storetest.FaultDeadlock:
		err, want = c.deadlock(ctx, t, tx), 1213
	case storetest.FaultLockTimeout:
		err, want = c.lockWaitTimeout(ctx, t, tx), 1205
	case storetest.FaultSerialization:
		err, want = c.serializationFailure(ctx, t, tx), 1020
		if errNumber(err) == 1193 { // no innodb_snapshot_isolation on this server
			return storetest.ErrNotInjected
		}
	case storetest.FaultReadOnly:
		// A read-only server (a failover under way) refuses the statement
		// alone and leaves the transaction as it was, as SIGNAL does: a
		// server cannot be made read-only for one test.
		_, err = tx.ExecContext(ctx, "SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1290, "+
			"MESSAGE_TEXT = 'The MariaDB server is running with the --read-only option so it cannot execute this statement'")
		want = 1290
	default:
		return storetest.ErrNotInjected
	}
	if errNumber(err) != want {
		t.Errorf("%s: error %v, want MySQL error %d", fault, err, want)
	}
	return err
}

// deadlock makes the execution's transaction a deadlock's victim: it locks
// row 1 and then row 2, another transaction row 2 and then row 1. The other
// transaction has written 50 rows first, so InnoDB rolls back the
// execution's (it picks the transaction that changed fewer rows).
func (c *faultCell) deadlock(ctx context.Context, t *testing.T, tx *mysqlstore.Tx) error {
	bg := context.Background()
	other, err := c.admin.BeginTx(bg, nil)
	if err != nil {
		t.Errorf("begin: %v", err)
		return err
	}
	defer func() { _ = other.Rollback() }()
	rows := make([]string, 50)
	for i := range rows {
		rows[i] = fmt.Sprintf("(%d, 0)", 100+i)
	}
	if _, err := other.ExecContext(bg, "INSERT INTO "+c.locks()+" VALUES "+strings.Join(rows, ", ")); err != nil {
		t.Errorf("the other transaction's writes: %v", err)
	}
	if _, err := other.ExecContext(bg, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2"); err != nil {
		t.Errorf("the other transaction's lock: %v", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 1"); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := other.ExecContext(bg, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 1")
		done <- err
	}()
	_, err = tx.ExecContext(ctx, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2")
	if oerr := <-done; oerr != nil {
		t.Errorf("the other transaction was the victim: %v", oerr)
	}
	return err
}

// lockWaitTimeout has the execution's transaction wait a second for a row
// another transaction holds.
func (c *faultCell) lockWaitTimeout(ctx context.Context, t *testing.T, tx *mysqlstore.Tx) error {
	bg := context.Background()
	other, err := c.admin.BeginTx(bg, nil)
	if err != nil {
		t.Errorf("begin: %v", err)
		return err
	}
	defer func() { _ = other.Rollback() }()
	if _, err := other.ExecContext(bg, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2"); err != nil {
		t.Errorf("the other transaction's lock: %v", err)
	}
	_, err = tx.ExecContext(ctx, "SET STATEMENT innodb_lock_wait_timeout = 1 FOR UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2")
	return err
}

// serializationFailure has the execution's transaction read row 3, another
// change it, and the transaction then update it under snapshot isolation:
// "Record has changed since last read".
func (c *faultCell) serializationFailure(ctx context.Context, t *testing.T, tx *mysqlstore.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT n FROM "+c.locks()+" WHERE id = 3").Scan(&n); err != nil {
		return err
	}
	if _, err := c.admin.ExecContext(context.Background(), "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 3"); err != nil {
		t.Errorf("the concurrent update: %v", err)
	}
	_, err := tx.ExecContext(ctx, "SET STATEMENT innodb_snapshot_isolation = ON FOR UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 3")
	return err
}

// errNumber returns the MySQL error number of err, or 0.
func errNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}
