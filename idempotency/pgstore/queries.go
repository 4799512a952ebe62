package pgstore

import "strings"

// recordColumns are the columns scanRecord reads, in order.
const recordColumns = `caller, key, fingerprint, status, attempt, generation, locked_until,
	recovery_point, recovery_data, response, resume, parked, created_at, expires_at`

// queries holds the store's SQL with the schema filled in. In every query the
// last parameter is the test time shift in microseconds, added to now().
// Queries on one record take its caller as $1 and its key as $2 and find it
// by @id: through the primary key index on the hash of both, and matching
// both exactly.
type queries struct {
	claim, get, saveRecoveryPoint, complete, completeTx, release string
	releaseUnstarted, endStartedLease                            string
	deleteExpired, takeOverStalled, park, listParked             string
	enqueue, claimOutbox, markDelivered, markFailed, purge       string
}

// recordID selects the record of caller $1 and key $2.
const recordID = `key_hash = sha256(sha256($1::bytea) || $2::bytea) AND caller = $1 AND key = $2`

// at is the shifted database clock for parameter n.
func at(n string) string { return "(now() + $" + n + "::bigint * interval '1 microsecond')" }

func buildQueries(schema string) queries {
	r := strings.NewReplacer("__SCHEMA__", schema, "__GENERATION_SEQ__", generationSeq(schema), "@now6", at("6"), "@now2", at("2"), "@now5", at("5"),
		"@now4", at("4"), "@now3", at("3"), "@now8", at("8"), "@now7", at("7"), "@cols", recordColumns, "@id", recordID)
	return queries{
		// One statement. cur reads the row as the statement's snapshot sees
		// it; when it is settled (live, and not a stale in-progress row this
		// claim may take over) the statement reports it and writes nothing:
		// no row lock, no transaction id, no WAL flush on the replay path.
		// Otherwise c inserts; or replaces an expired row (attempt 1 and the
		// new generation the insert drew); or takes over a stale in-progress
		// row with the same fingerprint, bumping attempt and keeping the
		// generation, under the row lock ON CONFLICT takes. If c then changes
		// nothing (a concurrent claim won the row after the snapshot), the
		// statement returns no row and Claim runs it again. The conflict is
		// on the hash of caller and key; the update also requires both to
		// match, so a row of another pair is never taken. $8 is the
		// recovery point a new row starts with ('' for none), which a
		// takeover gives a row that has none. m gives it (and the resume,
		// if none) to a live row held by another execution that has none,
		// leaving the execution to its holder; if the row changed since
		// the snapshot, m changes nothing and Claim runs the statement
		// again.
		//
		// The statement's clock (n) is read once, when the statement runs,
		// after its snapshot was taken (clock_timestamp, not now(), which
		// is the instant the transaction began): a write its snapshot sees
		// never carries a later time than its clock, so a lease that a
		// concurrent Park ended is never reported as held.
		claim: r.Replace(`WITH n AS MATERIALIZED (
	SELECT clock_timestamp() + $7::bigint * interval '1 microsecond' AS t
), cur AS (
	SELECT @cols,
		expires_at > n.t AND NOT (status = 1 AND locked_until < n.t AND fingerprint = $3) AS settled
	FROM __SCHEMA__.idempotency_keys, n
	WHERE @id
), m AS (
	UPDATE __SCHEMA__.idempotency_keys AS k
	SET recovery_point = $8::bytea, resume = COALESCE(k.resume, $6::bytea)
	FROM n
	WHERE @id AND COALESCE($8::bytea, '') <> '' AND k.status = 1 AND k.recovery_point = ''
		AND k.fingerprint = $3 AND k.locked_until >= n.t AND k.expires_at > n.t
		AND EXISTS (SELECT 1 FROM cur WHERE settled)
	RETURNING @cols
), c AS (
	INSERT INTO __SCHEMA__.idempotency_keys AS k (@cols)
	SELECT $1, $2, $3, 1, 1, nextval(__GENERATION_SEQ__),
		n.t + $4::bigint * interval '1 microsecond', COALESCE($8::bytea, ''), NULL, NULL, $6::bytea, NULL,
		n.t, n.t + $5::bigint * interval '1 microsecond'
	FROM n
	WHERE NOT EXISTS (SELECT 1 FROM cur WHERE settled)
` + claimUpsert + `)
SELECT true, @cols FROM c
UNION ALL
SELECT false, @cols FROM m
UNION ALL
SELECT false, @cols FROM cur WHERE settled
	AND NOT (COALESCE($8::bytea, '') <> '' AND status = 1 AND recovery_point = '' AND fingerprint = $3)`),

		get: r.Replace(`SELECT @cols FROM __SCHEMA__.idempotency_keys
WHERE @id AND expires_at > @now3`),

		// An empty point keeps the row's point and data, if it has a point.
		saveRecoveryPoint: r.Replace(`UPDATE __SCHEMA__.idempotency_keys
SET recovery_point = CASE WHEN $4::bytea = '' THEN recovery_point ELSE $4::bytea END,
	recovery_data = CASE WHEN $4::bytea = '' AND recovery_point <> '' THEN recovery_data ELSE $5::bytea END,
	locked_until = @now8 + $6::bigint * interval '1 microsecond'
WHERE @id AND attempt = $3 AND generation = $7 AND status = 1 AND expires_at > @now8`),

		complete: r.Replace(`UPDATE __SCHEMA__.idempotency_keys
SET status = 2, response = $4, resume = NULL
WHERE @id AND attempt = $3 AND generation = $5 AND status = 1 AND expires_at > @now6`),

		// The same fenced update, raising EO001 when it matched nothing, so that
		// the COMMIT pipelined after it in one round trip never runs.
		completeTx: r.Replace(`WITH u AS (
	UPDATE __SCHEMA__.idempotency_keys
	SET status = 2, response = $4, resume = NULL
	WHERE @id AND attempt = $3 AND generation = $5 AND status = 1 AND expires_at > @now6
	RETURNING 1
)
SELECT __SCHEMA__.require_fence((SELECT count(*) FROM u))`),

		release: r.Replace(`DELETE FROM __SCHEMA__.idempotency_keys
WHERE @id AND attempt = $3 AND generation = $4 AND status = 1 AND expires_at > @now5`),

		// Release of a row without a recovery point; for a row that got
		// one, endStartedLease ends its lease instead.
		releaseUnstarted: r.Replace(`DELETE FROM __SCHEMA__.idempotency_keys
WHERE @id AND attempt = $3 AND generation = $4 AND status = 1 AND expires_at > @now5 AND recovery_point = ''`),

		endStartedLease: r.Replace(`UPDATE __SCHEMA__.idempotency_keys
SET locked_until = @now5
WHERE @id AND attempt = $3 AND generation = $4 AND status = 1 AND expires_at > @now5 AND recovery_point <> ''`),

		// Rows locked by another sweeper, or by a claim replacing them, are skipped.
		deleteExpired: r.Replace(`DELETE FROM __SCHEMA__.idempotency_keys k
USING (
	SELECT key_hash FROM __SCHEMA__.idempotency_keys
	WHERE expires_at <= @now2
	LIMIT $1
	FOR UPDATE SKIP LOCKED
) d
WHERE k.key_hash = d.key_hash`),

		// Executions that began and whose lease ran out, oldest lease
		// first, taken over in one statement: each row's attempt moves on
		// under its row lock, and rows another takeover (or a claim) holds
		// are skipped, not waited for. A row changed since the statement's
		// snapshot is checked again once locked, so a row just taken over
		// elsewhere, whose lease is live again, is left alone. $4 is the
		// only caller whose rows are taken over (NULL: every caller).
		takeOverStalled: r.Replace(`UPDATE __SCHEMA__.idempotency_keys k
SET attempt = k.attempt + 1, locked_until = @now3 + $2::bigint * interval '1 microsecond', parked = NULL
FROM (
	SELECT key_hash FROM __SCHEMA__.idempotency_keys
	WHERE status = 1 AND recovery_point <> '' AND parked IS NULL
		AND locked_until < @now3 AND expires_at > @now3
		AND ($4::bytea IS NULL OR caller = $4)
	ORDER BY locked_until
	LIMIT $1
	FOR UPDATE SKIP LOCKED
) s
WHERE k.key_hash = s.key_hash
RETURNING @cols`),

		park: r.Replace(`UPDATE __SCHEMA__.idempotency_keys
SET parked = $4, locked_until = @now6
WHERE @id AND attempt = $3 AND generation = $5 AND status = 1 AND expires_at > @now6`),

		// Parked rows only (a partial index holds them), in the order of
		// caller then key, after the page's cursor ($1, $2).
		listParked: r.Replace(`SELECT @cols FROM __SCHEMA__.idempotency_keys
WHERE status = 1 AND parked IS NOT NULL AND expires_at > @now4
	AND (caller, key) > ($1::bytea, $2::bytea)
ORDER BY caller, key
LIMIT $3`),

		enqueue: r.Replace(`INSERT INTO __SCHEMA__.outbox (topic, payload) VALUES ($1, $2) RETURNING id::text`),

		claimOutbox: r.Replace(`SELECT seq, id::text, topic, payload, created_at, failures
FROM __SCHEMA__.outbox
WHERE delivered_at IS NULL AND parked_at IS NULL
ORDER BY seq
LIMIT $1
FOR UPDATE SKIP LOCKED`),

		markDelivered: r.Replace(`UPDATE __SCHEMA__.outbox SET delivered_at = now() WHERE seq = ANY($1)`),

		// $3: park the message once its failures reach this (0: never).
		markFailed: r.Replace(`UPDATE __SCHEMA__.outbox
SET failures = failures + 1, last_error = $2,
	parked_at = CASE WHEN $3::int > 0 AND failures + 1 >= $3::int THEN now() END
WHERE seq = $1
RETURNING parked_at IS NOT NULL`),

		purge: r.Replace(`DELETE FROM __SCHEMA__.outbox o
USING (
	SELECT seq FROM __SCHEMA__.outbox
	WHERE delivered_at IS NOT NULL AND delivered_at <= @now3 - $2::bigint * interval '1 microsecond'
	LIMIT $1
	FOR UPDATE SKIP LOCKED
) d
WHERE o.seq = d.seq`),
	}
}

// claimUpsert is the claim's conflict rule, shared by Claim's statement
// and ClaimBatch's: a record whose TTL ended is replaced (a new
// generation), a stalled one with the same fingerprint is taken over (the
// next attempt, keeping its generation and recovery point), and any
// other is left as it is (the statement answers it from cur).
const claimUpsert = `	ON CONFLICT (key_hash) DO UPDATE SET
		fingerprint    = excluded.fingerprint,
		status         = 1,
		attempt        = CASE WHEN k.expires_at <= excluded.created_at THEN 1 ELSE k.attempt + 1 END,
		generation     = CASE WHEN k.expires_at <= excluded.created_at THEN excluded.generation ELSE k.generation END,
		locked_until   = excluded.locked_until,
		recovery_point = CASE WHEN k.expires_at <= excluded.created_at OR k.recovery_point = '' THEN excluded.recovery_point
			ELSE k.recovery_point END,
		recovery_data  = CASE WHEN k.expires_at <= excluded.created_at THEN NULL ELSE k.recovery_data END,
		response       = NULL,
		resume         = CASE WHEN excluded.resume IS NOT NULL THEN excluded.resume
			WHEN k.expires_at <= excluded.created_at THEN NULL ELSE k.resume END,
		parked         = NULL,
		created_at     = CASE WHEN k.expires_at <= excluded.created_at THEN excluded.created_at ELSE k.created_at END,
		expires_at     = CASE WHEN k.expires_at <= excluded.created_at THEN excluded.expires_at ELSE k.expires_at END
	WHERE k.caller = excluded.caller AND k.key = excluded.key AND (k.expires_at <= excluded.created_at
		OR (k.status = 1 AND k.locked_until < excluded.created_at AND k.fingerprint = excluded.fingerprint))
	RETURNING @cols
`
