// Package redisstore is the Redis store for package idempotency, built on
// go-redis v9. It lives in a module of its own so that the client never
// reaches users of the root module.
//
// # Setup
//
// Nothing needs creating: build a Store on a client and use it.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	store, err := redisstore.New(rdb)
//	mw := idempotency.Middleware(idempotency.NewRunner(store), callerOf)
//
// Any redis.UniversalClient works: a single server, a primary watched by
// Sentinel (redis.NewFailoverClient), or a Redis Cluster
// (redis.NewClusterClient). Redis 6.2 or later.
//
// Upgrading from an earlier version: docs/upgrading.md in the repository.
//
// # Semantics
//
// The key of a record is (caller, key), each of any length and any bytes:
// a record's Redis key holds a SHA-256 of both, and every script compares
// the caller and key it finds with the ones asked for. Every operation on a
// record (Claim, Get, SaveRecoveryPoint, Complete, Release,
// ReleaseUnstarted, Park) is one Lua script, so one round trip, and atomic: Redis runs a script alone. A claim
// creates the record, replaces an expired one, takes over a stale
// in-progress one with the same fingerprint (bumping the attempt counter),
// or reports the live one, never a read followed by a separate write. Every
// later write is conditional on the record's attempt counter and
// generation; when they no longer match (another execution took over, or
// the record was released or expired and claimed again) the write changes
// nothing and returns idempotency.ErrLeaseLost. Leases and expiry use the
// Redis clock (TIME), never the clock of the process.
//
// Generations: each shard keeps the last generation it gave; a new record
// takes the next one, and never less than the Redis clock in microseconds,
// so a generation is never given twice to a key, even after the counter
// was lost with the data (a restart without persistence).
//
// # Redis Cluster
//
// Records are spread over shards (WithShards, 16 by default). The keys of
// one shard (its records and its sorted sets of expiring, stalled and parked
// records) share a hash tag, "{prefix:shard}", so they live in one Cluster
// slot and one script changes a record and its indexes together; the shards
// spread over the nodes. TakeOverStalled, ListParked and DeleteExpired read
// every shard (one pipelined round trip, a second one to act on what they
// found) and act on each record atomically in its shard's script. The
// number of shards must never change while records live.
//
// # Expiry
//
// A record behaves as absent from its ExpiresAt on. DeleteExpired (the
// Sweeper) removes expired records and their index entries; run one on every
// instance. Redis also drops a record's hash by itself a day after it
// expired, should no sweeper run.
//
// # What a restart loses
//
// A store is as durable as the Redis behind it. Redis acknowledges a write
// before it is on disk unless the append-only file is synced on every
// write:
//
//   - appendonly yes, appendfsync always: nothing acknowledged is lost by a
//     crash or a kill of the server (the chaos test kills it with SIGKILL
//     mid-run: no key runs twice).
//   - appendonly yes, appendfsync everysec (Redis's default with AOF): a
//     crash loses up to about a second of writes.
//   - RDB snapshots only, or no persistence: a restart loses every write
//     since the last snapshot, or everything.
//
// What a lost write costs: a lost claim or completion means the key's next
// request runs again, as if it were new (the chaos test without persistence
// shows it: every key completed before the restart runs again when its
// client sends it again); a lost recovery point means a step runs again,
// with the same downstream key, so a downstream service that deduplicates
// by it still acts once. A paused execution whose record was lost gets
// ErrLeaseLost at its next write and stops: a restart never lets an old
// fence write into a new record, since generations only grow. Replication
// is asynchronous too: a failover to a replica loses the writes it had not
// received (WAIT narrows that; it does not close it). For exactly-once
// effects, run Redis with appendfsync always, or keep the effects that must
// not repeat behind downstream keys; otherwise a restart turns exactly-once
// into at-least-once for the keys in flight and completed before it.
//
// A script's effect and its reply are not one transaction: when the reply
// is lost (the connection broke after the script ran), the caller sees an
// error although the write was made. A claim or a takeover of stalled
// executions then holds a lease nobody uses until it runs out, and the
// record has spent an attempt; a completion is replayed to the next
// request.
//
// go-redis retries a command whose connection failed (Options.MaxRetries).
// A script it sent again after its reply was lost is answered as the record
// then stands: a repeated claim reports the execution in progress (its own,
// until the lease runs out), a repeated completion gets ErrLeaseLost. Never
// a second execution.
//
// # Errors
//
// Errors a retry may get past (refused or broken connections, timeouts,
// LOADING, BUSY, READONLY, CLUSTERDOWN, TRYAGAIN, OOM, ...) are left as they
// are, so the Middleware answers 503 with Retry-After; errors every retry
// would meet again (a script error, a key of the wrong type) are marked
// retry.Permanent, answered 500.
//
// # Tests
//
// WithTimeShift is test support: it adds an offset to the Redis clock as
// the scripts see it, which is how the conformance suite's Harness.Advance
// moves a store's time. The package's tests run against the Redis named by
// EXACTLYONCE_REDIS_ADDR (default 127.0.0.1:6379), each on a key prefix of
// its own; without it they fail at once with one message saying what they
// need. The chaos test starts redis-server itself, twice: with the
// append-only file synced on every write, and without persistence.
package redisstore
