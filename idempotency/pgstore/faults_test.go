package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// The fault matrix on PostgreSQL: real deadlocks, lock timeouts and
// read-only transactions in the handler's transaction, backends terminated
// by the server (pg_terminate_backend), workers killed and paused.
func TestFaults(t *testing.T) {
	t.Parallel()
	storetest.RunFaults(t, func(t *testing.T) (storetest.Harness, storetest.Faults) {
		admin := newPool(t)
		schema := newSchema(t, admin)
		cfg, err := pgxpool.ParseConfig(dsn())
		require.NoError(t, err)
		app := "pgstore_faults_" + randomHex(12)
		cfg.ConnConfig.RuntimeParams["application_name"] = app
		shift := new(pgstore.TimeShift)
		s, err := pgstore.New(newPoolFrom(t, cfg), pgstore.WithSchema(schema), pgstore.WithTimeShift(shift))
		require.NoError(t, err)
		c := &pgFaultCell{admin: admin, schema: schema, app: app}
		c.setUp(t)
		return storetest.Harness{
			Store:     s,
			Advance:   shift.Advance,
			TxWrite:   func(ctx context.Context, name string) error { return localWrite(ctx, schema, name) },
			TxWritten: func(t *testing.T, name string) bool { return written(t, admin, schema, name) },
		}, storetest.Faults{Drop: c.drop, Tx: c.tx}
	})
}

// pgFaultCell is one cell's schema, the application name of its store's
// connections, and a pool of its own for the other side of a deadlock or a
// lock wait, and for pg_terminate_backend.
type pgFaultCell struct {
	admin  *pgxpool.Pool
	schema string
	app    string
}

// locks is the table whose rows the faults lock: rows 1 to 3.
func (c *pgFaultCell) locks() string { return table(c.schema, "locks") }

func (c *pgFaultCell) setUp(t *testing.T) {
	_, err := c.admin.Exec(context.Background(), "CREATE TABLE "+c.locks()+" (id int PRIMARY KEY, n int NOT NULL);"+
		"INSERT INTO "+c.locks()+" VALUES (1, 0), (2, 0), (3, 0)")
	require.NoError(t, err)
}

// drop terminates every backend of the store's pool, the transaction's
// included, and waits until they are gone.
func (c *pgFaultCell) drop(_ context.Context, t *testing.T) {
	ctx := context.Background()
	if _, err := c.admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", c.app); err != nil {
		t.Errorf("pg_terminate_backend: %v", err)
		return
	}
	c.waitFor(t, "the store's backends to end",
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = $1", c.app)
}

// waitFor polls query, bounded, until it returns true.
func (c *pgFaultCell) waitFor(t *testing.T, what, query string, args ...any) {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var ok bool
		err := c.admin.QueryRow(context.Background(), query, args...).Scan(&ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("waited 10s for %s (%v)", what, err)
			return
		}
		<-tick.C
	}
}

// tx makes a statement of the transaction in ctx fail with the server's own
// error for fault.
func (c *pgFaultCell) tx(ctx context.Context, t *testing.T, fault storetest.Fault) error {
	tx, ok := pgstore.TxFrom(ctx)
	if !ok {
		return errNoTx
	}
	var (
		err  error
		want string
	)
	switch fault {
	case storetest.FaultDeadlock:
		err, want = c.deadlock(ctx, t, tx), "40P01"
	case storetest.FaultLockTimeout:
		err, want = c.lockTimeout(ctx, t, tx), "55P03"
	case storetest.FaultSerialization:
		// A serialization failure needs a transaction that began at
		// REPEATABLE READ or above, and the store's begins at the server's
		// level with the work's first statement. PostgreSQL aborts a
		// transaction alike whatever error a statement raised, so the
		// server raising 40001 is the same fault to the store.
		_, err = tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'could not serialize access due to concurrent update' "+
			"USING ERRCODE = 'serialization_failure'; END $$")
		want = "40001"
	case storetest.FaultReadOnly:
		if _, err = tx.Exec(ctx, "SET TRANSACTION READ ONLY"); err == nil {
			_, err = tx.Exec(ctx, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 3")
		}
		want = "25006"
	default:
		return storetest.ErrNotInjected
	}
	if code := sqlState(err); code != want {
		t.Errorf("%s: error %v, want SQLSTATE %s", fault, err, want)
	}
	return err
}

// deadlock makes the execution's transaction a deadlock's victim: it locks
// row 1 and then row 2, another transaction row 2 and then row 1. The other
// waits first, with a deadlock_timeout of 10 s, and the execution's
// transaction with one of 50 ms, so it is the one that finds the deadlock
// and is rolled back.
func (c *pgFaultCell) deadlock(ctx context.Context, t *testing.T, tx pgx.Tx) error {
	bg := context.Background()
	other, err := c.admin.Begin(bg)
	if err != nil {
		t.Errorf("begin: %v", err)
		return err
	}
	defer func() { _ = other.Rollback(bg) }()
	var pid int
	if _, err := other.Exec(bg, "SET LOCAL deadlock_timeout = '10s'"); err != nil {
		t.Errorf("the other transaction's deadlock_timeout: %v", err)
	}
	if err := other.QueryRow(bg, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Errorf("the other transaction's pid: %v", err)
	}
	if _, err := other.Exec(bg, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2"); err != nil {
		t.Errorf("the other transaction's lock: %v", err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '50ms'"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 1"); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := other.Exec(bg, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 1")
		done <- err
	}()
	c.waitFor(t, "the other transaction to wait for the lock",
		"SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')", pid)
	_, err = tx.Exec(ctx, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2")
	if oerr := <-done; oerr != nil {
		t.Errorf("the other transaction was the victim: %v", oerr)
	}
	return err
}

// lockTimeout has the execution's transaction wait 100 ms for a row another
// transaction holds.
func (c *pgFaultCell) lockTimeout(ctx context.Context, t *testing.T, tx pgx.Tx) error {
	bg := context.Background()
	other, err := c.admin.Begin(bg)
	if err != nil {
		t.Errorf("begin: %v", err)
		return err
	}
	defer func() { _ = other.Rollback(bg) }()
	if _, err := other.Exec(bg, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2"); err != nil {
		t.Errorf("the other transaction's lock: %v", err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '100ms'"); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE "+c.locks()+" SET n = n + 1 WHERE id = 2")
	return err
}

// sqlState returns the SQLSTATE of err, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return fmt.Sprint(err)
}
