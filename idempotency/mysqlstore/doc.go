// Package mysqlstore is the MySQL and MariaDB store for package idempotency,
// built on go-sql-driver/mysql. It lives in a module of its own so that the
// driver never reaches users of the root module.
//
// # Setup
//
// Create the tables once, at start-up or from a migration tool, then open a
// Store:
//
//	cfg, _ := mysql.ParseDSN("app@tcp(db:3306)/app")
//	store, err := mysqlstore.Open(cfg)
//	if err := mysqlstore.Migrate(ctx, store.DB(), mysqlstore.DefaultTablePrefix); err != nil { ... }
//
// SchemaSQL returns the DDL for teams that apply migrations with their own
// tool. MySQL 8.0 or MariaDB 10.6 or later (FOR UPDATE SKIP LOCKED).
//
// Upgrading from an earlier version: docs/upgrading.md in the repository.
//
// Open makes the store's own pool of connections, from a copy of the
// driver's configuration with two settings of its own: ClientFoundRows, so
// that an UPDATE reports the rows it matched rather than those it changed
// (MySQL's default would count a fenced write that sets a value it already
// had as a lost lease), and InterpolateParams, so that a statement with
// arguments is one round trip instead of a prepare, an execute and a close.
//
// # Semantics
//
// The key of a record is (caller, key), each of any length up to what a
// MEDIUMBLOB holds and any bytes: the primary key is a SHA-256 of both
// (an index entry cannot take a long caller or key), and every statement
// matches caller and key exactly as well. Times are microseconds since the
// Unix epoch from the database clock (UTC_TIMESTAMP), never the process's.
//
// A claim reads the record and the clock in one statement, without a lock
// (a consistent read, which in MariaDB's default REPEATABLE READ is a fresh
// snapshot for each autocommit statement): a completed, live in-progress or
// mismatching record is reported as it is, in one round trip, and nothing
// is written. Otherwise one conditional write makes the claim: an INSERT
// creates the record (a plain INSERT rather than INSERT IGNORE, which would
// also turn errors other than the duplicate key into warnings); an UPDATE
// conditional on the generation read and on the record having expired
// replaces an expired one; an UPDATE conditional on the attempt and
// generation read, the fingerprint and the lease having run out takes a
// stale in-progress one over. A duplicate-key error, or an UPDATE that
// matched no row, means another claim changed the record since the read;
// the claim reads again. Every later write (SaveRecoveryPoint, Complete,
// Release, Park) is one UPDATE or DELETE conditional on attempt, generation,
// state and expiry, checked by the rows it matched: none means
// idempotency.ErrLeaseLost.
//
// Generations come from a table: a store takes a block of 1,024 with one
// UPDATE and gives them out, so none is ever given twice, even across
// restarts and instances (an unused block is lost, never reused).
//
// # Local effects in the same transaction
//
// Store implements idempotency.TxStore. TxFrom gives the handler the
// completion transaction: its writes commit with the stored response, in the
// transaction whose last statement is the fenced UPDATE, or roll back with
// it when the lease was lost. The transaction begins with its first
// statement; an execution that writes nothing locally completes with one
// autocommit UPDATE. MySQL rolls back some failed statements alone and lets
// the transaction go on, so a COMMIT would keep the statements that worked,
// and answers others (a deadlock's victim) by rolling back the whole
// transaction and leaving the session in autocommit, so a later statement
// would commit at once: the store's connections see every failed statement
// (however it was made), and a transaction in which one failed takes no
// more statements and is never committed (see Tx). The
// transaction runs at the server's isolation level (REPEATABLE READ by
// default); the fenced UPDATE reads the record's latest version whatever
// the level.
//
// # Reconciler and sweeper
//
// TakeOverStalled and DeleteExpired run in READ COMMITTED transactions
// (no gap locks). Stalled executions are found through an index of the rows
// executing now (a generated column, NULL for every other row) and taken
// over with FOR UPDATE SKIP LOCKED, so reconcilers on every instance share
// the work; parked ones through an index of their ids. A sweep reads expired
// rows without a lock and deletes those that still are expired by primary
// key, in the order a claim locks a row, so it never deadlocks with a claim
// replacing one. A transaction InnoDB rolls back to break a deadlock runs
// again.
//
// # Durability
//
// InnoDB with innodb_flush_log_at_trx_commit=1 (the default) keeps every
// committed write through a crash: the chaos test kills MariaDB with SIGKILL
// mid-run, and no key runs twice. With 0 or 2 a crash loses up to about a
// second of commits, and with asynchronous replication a failover loses what
// the replica had not received: a lost claim or completion means the key's
// next request runs again.
//
// # Errors
//
// Errors a retry may get past (broken connections, deadlocks, lock wait
// timeouts, too many connections, a read-only server during a failover, a
// shutdown) are left as they are, so the Middleware answers 503 with
// Retry-After; errors every retry would meet again (a missing table, a
// refused login, a value the server cannot take) are marked
// retry.Permanent, answered 500.
//
// # Tests
//
// The package's tests run the fault matrix (storetest.RunFaults) with real
// deadlocks, lock wait timeouts and snapshot-isolation failures in the
// handler's transaction, and connections killed with KILL CONNECTION.
//
// WithTimeShift is test support: it adds an offset to the database clock as
// the store's statements see it, which is how the conformance suite's
// Harness.Advance moves a store's time. The package's tests run against the
// server named by EXACTLYONCE_MYSQL_DSN (default
// root@tcp(127.0.0.1:3306)/test), each on tables with a prefix of its own;
// without it they fail at once with one message saying what they need. The
// chaos test makes a MariaDB data directory with mariadb-install-db and
// starts mariadbd on it itself.
package mysqlstore
