package pgstore

import "strings"

// batchQueries holds the SQL of a BatchStore's set-based statements, with
// the schema filled in: one statement claims all the keys of a batch, one
// completes all the outcomes of a commit. The per-key work of Claim and
// Complete is done once per statement, not once per key.
type batchQueries struct {
	claim, complete string
}

// recordColumnsOf are recordColumns qualified by the table alias k.
const recordColumnsOf = `k.caller, k.key, k.fingerprint, k.status, k.attempt, k.generation, k.locked_until,
	k.recovery_point, k.recovery_data, k.response, k.resume, k.parked, k.created_at, k.expires_at`

func buildBatchQueries(schema string) batchQueries {
	r := strings.NewReplacer("__SCHEMA__", schema, "__GENERATION_SEQ__", generationSeq(schema), "@now6", at("6"),
		"@now8", at("8"), "@kcols", recordColumnsOf, "@cols", recordColumns)
	return batchQueries{
		// The claim statement of Claim (see queries.claim), over the rows
		// of r: the requests, one per key (no key twice), given as
		// arrays in the order of their key's hash. A request whose
		// statement changed nothing is missing from the answer; ClaimBatch
		// claims it again alone; so is one that finds its record held
		// without a recovery point while it brings one (Claim saves it on
		// the record). A new record's generation is the
		// sequence's next value mixed (XOR) with $9, a random value of the
		// batch with bit 62 set: distinct within the batch, never 0, and
		// not drawn again after a database crash that lost the claim and
		// the sequence's advance with it (see ClaimBatch), but for a
		// chance of one in 2^62.
		claim: r.Replace(`WITH n AS MATERIALIZED (
	SELECT clock_timestamp() + $8::bigint * interval '1 microsecond' AS t
), r AS (
	SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bigint[], $5::bigint[], $6::bytea[], $7::bytea[])
		AS r(caller, key, fingerprint, lease, ttl, resume, point)
), cur AS (
	SELECT @kcols,
		k.expires_at > n.t AND NOT (k.status = 1 AND k.locked_until < n.t AND k.fingerprint = r.fingerprint) AS settled,
		k.status = 1 AND k.recovery_point = '' AND COALESCE(r.point, '') <> '' AND k.fingerprint = r.fingerprint AS markable
	FROM r JOIN __SCHEMA__.idempotency_keys k
		ON k.key_hash = sha256(sha256(r.caller) || r.key) AND k.caller = r.caller AND k.key = r.key, n
), c AS (
	INSERT INTO __SCHEMA__.idempotency_keys AS k (@cols)
	SELECT r.caller, r.key, r.fingerprint, 1, 1, nextval(__GENERATION_SEQ__) # $9::bigint,
		n.t + r.lease * interval '1 microsecond', COALESCE(r.point, ''), NULL, NULL, r.resume, NULL,
		n.t, n.t + r.ttl * interval '1 microsecond'
	FROM r, n
	WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.caller = r.caller AND cur.key = r.key AND cur.settled)
` + claimUpsert + `)
SELECT true, @cols FROM c
UNION ALL
SELECT false, @cols FROM cur WHERE settled AND NOT markable`),

		// The fenced update of Complete, for many fences at once; the
		// fences of the records it completed are returned, the others
		// lost theirs.
		// The expiry is tested as a difference, which no index serves, so
		// that the records are found by their key (see indexLookups), not
		// by a scan of the expiry index over every live record.
		complete: r.Replace(`UPDATE __SCHEMA__.idempotency_keys k
SET status = 2, response = u.response, resume = NULL
FROM unnest($1::bytea[], $2::bytea[], $3::bigint[], $4::bytea[], $5::bigint[]) AS u(caller, key, attempt, response, generation)
WHERE k.key_hash = sha256(sha256(u.caller) || u.key) AND k.caller = u.caller AND k.key = u.key
	AND k.attempt = u.attempt AND k.generation = u.generation AND k.status = 1 AND k.expires_at - @now6 > interval '0'
RETURNING k.caller, k.key, k.attempt, k.generation`),
	}
}
