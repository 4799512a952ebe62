// Package idempotency is the server half of exactlyonce: it runs a unit of
// work at most once to completion per (caller, key) and returns the stored
// outcome to every repeat, so that a client may retry safely.
//
// # The life of one request
//
// Every request with a key goes through the same stages; the names that
// belong to each are on its line.
//
//	claim (Runner.Do, Middleware)
//	 ├─ new key ─────────► execute the Work (an *Execution, FromContext)
//	 │                      ├─ Reject(err), or a 4xx before MarkStarted: nothing stored, key freed
//	 │                      ├─ MarkStarted / Execution.Step: execution began, the outcome will be stored
//	 │                      ├─ outcome (nil error): stored, with local writes (TxStore) ──► completed
//	 │                      ├─ Abort(outcome, err): writes rolled back, outcome stored ──► completed
//	 │                      └─ error after a Step: key kept; the next retry takes over
//	 ├─ completed ───────► replay: Result.Replayed; HTTP: the stored response, Idempotent-Replayed: true
//	 ├─ in progress ─────► *InProgressError with RetryAfter; HTTP 409 with Retry-After
//	 ├─ other payload ───► ErrFingerprintMismatch; HTTP 422
//	 └─ lease ran out ───► taken over: resumes after the last completed Step;
//	                       the old holder's writes fail with ErrLeaseLost
//
//	nobody retries a stalled execution ─► a Reconciler takes it over the same way
//	 ├─ resumable (Request.Work and Runner.Register, or WithResume) ─► resumed, outcome stored
//	 └─ nothing to resume with, or MaxAttempts reached ─► parked (Store.Park), reported
//
// Records live for the TTL (WithTTL); StartSweeper (or SweeperConfig.Sweep)
// removes the expired ones.
//
// # Core
//
// A Runner does the work. Runner.Do claims the key atomically in a Store,
// runs the Work if the claim is new, stores the outcome and returns it; a
// repeat gets the stored outcome (Result.Replayed), a concurrent repeat gets
// an *InProgressError (with a Retry-After hint), and a repeat with another
// Request.Fingerprint gets ErrFingerprintMismatch. The key is scoped by
// Request.Caller: two callers never share keys or outcomes. The same core
// serves a queue consumer (key = message id), an internal job (key = a
// natural key) and HTTP (Middleware).
//
// Once a Work runs, its caller no longer decides the outcome: the Work's
// context keeps the values of the context given to Do, but not its
// cancellation (a client that disconnects from the Middleware does not cut
// a handler short). It is bounded by the lease instead: its deadline is the
// end of the lease, moved on by every recovery point and Execution.Extend,
// and it ends when the lease runs out and when the Work returns.
//
// A claim is a lease (WithLease, default one minute). A Work that runs past
// its lease, or whose process died, is taken over by the next retry: the
// record's attempt counter is incremented, and every later write of the old
// attempt is fenced out by it (ErrLeaseLost), so a paused holder can never
// overwrite the newer outcome. Keys live for the TTL (WithTTL, default 24
// hours) from their first claim; then the key is free again. A key claimed
// again after its record was released or expired gets a new record, whose
// attempts count from 1 again but whose generation is new, and writes are
// fenced by the generation too: a paused holder of the old record cannot
// write to the new one either.
//
// # Recovery points
//
// External effects (a charge, an email) go in steps: Execution.Step saves a
// recovery point, calls out with a downstream idempotency key derived from
// (caller, key, step) (DownstreamKey: a SHA-256 based UUID), and saves the
// step's result. A retry that takes over resumes after the last completed
// step and calls an unfinished one again with the same downstream key, for the
// downstream service to deduplicate. A Work that fails after a step began
// keeps the key for the next retry, which resumes at once.
//
// # Reconciler
//
// A retry that comes back resumes a stalled execution; when none comes (a
// browser closed, a job runner gave up, a webhook sender will call again
// only hours later), a Reconciler does. StartReconciler runs one beside the
// Sweeper (Runner.Reconcile makes a single pass); every instance sharing a store
// may run one, since the store gives each stalled execution to one of them
// per lease. Every interval it takes over, in batches, the executions that
// began (MarkStarted, or a Step) and whose lease ran out, and resumes each
// as a retry would: completed steps are skipped, an unfinished step is
// called again with its downstream key, and the outcome is stored, so a
// client that comes back late gets it byte for byte. A Reconciler resumes
// up to ReconcilerConfig.Batch executions at once, taking over more as
// soon as one ends, so a slow execution holds back only itself: a stalled
// execution is taken over within one interval of the end of its lease
// while there is room, and as soon as there is otherwise. A pass in which
// a resumption failed leaves what is left to the next pass.
//
// What it resumes with must be stored when the request arrives:
//
//   - for Runner.Do, name the work in Request.Work (registered with
//     Runner.Register on every instance) and give it what it needs in
//     Request.Input (Execution.Input reads it back);
//   - for the Middleware, WithResume stores the request (method, host, path,
//     query, the headers named, the body) and registers the handler; the
//     request is served again with the same caller and key, without
//     credentials (Authorization and Cookie are never stored).
//
// A resumable execution saves its started mark with the record (one more
// write, at MarkStarted), so the Reconciler knows it began; work that
// nothing else would run again (a broker's last delivery) asks for the
// mark in the claim itself (Request.StartedAtClaim), so it is resumable
// from its claim on, with no write between. A failure after the mark then
// keeps the key for a retry or the Reconciler, as a failure after a step
// does. The stored input lives with the record and goes when
// it completes. An execution with nothing to resume it with, or that
// reached ReconcilerConfig.MaxAttempts, is parked (Record.Parked) with its
// reason, logged and observed (OutcomeParked), and never taken over by a
// Reconciler again; its client's retry still may. Store.ListParked lists
// the parked executions with their reasons, page by page, and
// Runner.RetryParked runs one again at once once its cause is mended. A
// Work may park its own execution (Park) when it fails in a way that
// repeating will not mend: a queue consumer's poison message, say.
//
// # Batches
//
// A Store that is also a BatchStore (the PostgreSQL, MySQL and Redis
// stores, MemoryBatchStore) does the durable work of many executions at
// once: Runner.StartBatch claims the keys of many requests in one store
// operation, Batch.Do runs each as Do would, and Batch.Commit stores their
// outcomes (with their local writes, on PostgreSQL each in a savepoint of
// its own) in one commit. Every guarantee of Do holds for each execution;
// only its outcome becomes durable at the Commit after it. A queue
// consumer (package consumer) batches the messages it takes together.
//
// # Transactions
//
// When the Store is also a TxStore (as the PostgreSQL store is), the Work
// runs inside the transaction from TxStore.Begin: its context (the handler's
// request context, behind Middleware) carries it, and the outcome is stored
// through Tx.Complete, so local writes commit together with the outcome. On an
// error, a panic, Abort or a lost lease everything rolls back.
//
// A transaction is never committed in part. If any statement of it failed
// (an error from the database, a context that ended, no connection to be
// had, a statement that never reached the database), nothing of it commits
// and nothing is stored, whatever the Work made of the failure (an outcome,
// an Abort, a panic): the attempt failed, the key is freed (or, after a
// recovery point, left for the next retry to resume), and Do returns an
// error matching ErrTxFailed, so the retry runs cleanly. Behind the
// Middleware the client of that attempt gets 503 with Retry-After (code
// transaction_rolled_back; 500 without Retry-After when the failure is
// permanent), never a stored 5xx. Only a failure undone by rolling back the
// savepoint it happened in does not count (see Tx).
//
// # HTTP
//
// Middleware applies the core to HTTP requests: the key comes from the
// Idempotency-Key header (a Structured Field string or a plain token, see
// ParseKey), the caller from the Middleware's caller function, the fingerprint from the method,
// path, query and body (Fingerprint). It answers with RFC 9457 problem
// details: 400 for a missing or malformed key, 413 for a body over the limit,
// 422 for a key reused with another request, 409 with a short Retry-After
// (learned from how long requests take) while the first request is in
// progress. A completed key replays the stored status,
// header and body byte for byte with "Idempotent-Replayed: true"; 5xx
// responses are stored and replayed too, once execution began (MarkStarted),
// while rejections (4xx before the mark) free the key. See Middleware for
// streaming, hijacking, oversized responses and panics. A webhook
// receiver keys requests by the sender's event id: in a header
// (WithKeyHeader, such as X-GitHub-Delivery) or in the JSON body
// (WithKeyFromJSON).
//
// # Queue consumers
//
// Package idempotency/consumer runs a message handler inside Runner.Do,
// keyed by the message id, and acks a delivery only once its outcome is
// stored; the modules natsconsumer and amqpconsumer connect it to NATS
// JetStream and RabbitMQ.
//
// The file openapi.yaml in this package's directory documents the header,
// the status codes and the expiry window for clients of a service built on
// it, as OpenAPI 3.1 components to reference from the service's own
// description.
//
// # Stores
//
// MemoryStore keeps records in process memory, for one instance, tests and
// examples. Package idempotency/pgstore (a module of its own) keeps them in
// PostgreSQL. Every Store must pass the conformance suite in package
// idempotency/storetest. StartSweeper removes expired records from any
// Store periodically, and StartReconciler finishes stalled executions.
//
// # Configuring
//
// NewRunner and Middleware take Options (one type for both: each With*
// says which it is for, and the other ignores it); a component you start,
// StartReconciler or StartSweeper, takes a Config whose zero fields are the
// defaults.
//
// # Observing
//
// WithObserver hears what became of every call of Runner.Do and of every
// execution a Reconciler handled (an Outcome: executed, replayed,
// in_progress, mismatch, rejected, taken_over, reconciled, parked,
// failed); the otelretry module turns them into OpenTelemetry metrics and
// span events.
package idempotency
