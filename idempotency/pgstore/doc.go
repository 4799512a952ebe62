// Package pgstore is the PostgreSQL store for package idempotency, built on
// pgx v5. It lives in a module of its own so that the driver never reaches
// users of the root module.
//
// # Setup
//
// Create the tables once, at start-up or from a migration tool, then build a
// Store on a pool:
//
//	if err := pgstore.Migrate(ctx, pool, "exactlyonce"); err != nil { ... }
//	store, err := pgstore.New(pool, pgstore.WithSchema("exactlyonce"))
//
// A Store never creates its tables by itself. SchemaSQL returns the DDL for
// teams that apply migrations with their own tool.
//
// Upgrading from an earlier version: docs/upgrading.md in the repository.
//
// # Semantics
//
// The key of a record is (caller, key), each of any length and any bytes:
// the primary key index is on a SHA-256 of both, and every query matches
// both exactly as well. Claim is one statement and one round
// trip. It reads the row first; a completed, live in-progress or mismatching
// record is reported as it is, without a lock or a write, so replays are
// cheap. Otherwise INSERT ... ON CONFLICT DO UPDATE ... WHERE creates the
// record, replaces an expired one, or takes over a stale in-progress one with
// the same fingerprint (bumping the attempt counter) under the row lock that
// ON CONFLICT takes: never a read followed by a separate write. A created or
// replacing row draws a new generation from a sequence; a takeover keeps it.
// Every later write (SaveRecoveryPoint, Complete, Release, ReleaseUnstarted)
// is conditional on the attempt counter and the generation: zero rows matched
// means the lease was lost (or the row is another incarnation of the key),
// and the write returns idempotency.ErrLeaseLost. Leases and expiry use the database clock
// (now()), never the clock of the process; a claim reads it when its
// statement runs (clock_timestamp()), after the statement's snapshot, so
// that it never reports as held a lease that a write its snapshot sees
// (a Park) had ended.
//
// An error that every repeat of the call would meet again (a value or a
// limit the database refuses, a missing table, a failed login) is marked
// retry.Permanent, so the middleware answers it with 500 and no
// Retry-After; errors a retry may get past (refused or broken connections,
// timeouts, serialization failures, too many connections, a shutdown) are
// left unmarked and answered 503 with Retry-After.
//
// # Local effects in the same transaction
//
// Store implements idempotency.TxStore. Begin opens a transaction; Tx.Context
// puts it into a context, and TxFrom takes it out, so a handler writes its own
// rows in the transaction that stores the response. Tx.Complete sends the
// fenced update and the COMMIT in one round trip; if the lease was lost the
// update raises an error, so the COMMIT never runs and the handler's writes
// roll back with it. The transaction begins lazily, with the execution's
// first statement in it, so an execution that writes nothing locally costs no
// BEGIN and no COMMIT.
//
// A transaction in which a statement failed is never committed, not even in
// part. The store records every failure of a statement made through TxFrom's
// transaction (its savepoints, rows and batches included): an error from
// the server, and also one that never reached it, such as a context that
// had ended or no connection to be had from the pool, after which the
// server's transaction would otherwise still commit. After a failure at its
// top level the transaction refuses further statements, as PostgreSQL does
// in an aborted transaction. Tx.Err reports the failure; the Runner then
// rolls back, stores nothing and frees the key (idempotency.ErrTxFailed),
// whatever the handler answered, so the retry runs cleanly. A failure inside
// a savepoint that the handler rolls back is undone with it, as PostgreSQL
// undoes it. Statements sent through Conn() or LargeObjects() are not seen;
// one the server refused still keeps the COMMIT from taking effect.
//
// An execution that has used its transaction holds one pool connection for
// it, and needs a second one for each recovery point it saves meanwhile: size
// the pool for two connections per concurrent execution that does both, or a
// full pool can wait on itself.
//
// # External effects
//
// SaveRecoveryPoint commits on its own (never inside the Tx), so a recovery
// point saved before and after an outside call is durable whatever happens
// next.
//
// # Outbox
//
// Enqueue writes a follow-on message in the caller's transaction; a Relay
// delivers messages at least once, each with a stable id that the receiver
// uses as its idempotency key. Several relays may run at once; a relay that
// dies mid-batch loses nothing, since its transaction dies with it. A message
// that keeps failing holds back the ones after it, unless Relay.MaxFailures
// parks it.
//
// # Expiry
//
// DeleteExpired removes expired records in batches that skip locked rows; a
// Sweeper runs it periodically and may run on every instance.
//
// # Tests
//
// WithTimeShift is test support: it adds an offset to the database clock as
// the store's queries see it, which is how the conformance suite's
// Harness.Advance moves a store's time. The package's own tests run against a
// real PostgreSQL (13 or later, for gen_random_uuid) named by the environment
// variable EXACTLYONCE_PG_DSN (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), each in a fresh
// schema of its own. Without that server they fail at once, with one message
// saying what they need; they never skip.
package pgstore
