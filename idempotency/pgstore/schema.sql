-- Schema of the exactlyonce PostgreSQL store.
--
-- __SCHEMA__ stands for the quoted schema name, and __GENERATION_SEQ__ for the
-- name of the generation sequence in it as a string literal; Migrate and
-- SchemaSQL replace them.
-- Every statement is idempotent, so the file can be applied again safely.

CREATE SCHEMA IF NOT EXISTS __SCHEMA__;

-- Generations of idempotency records: every row created (inserted, or replacing
-- an expired row) takes the next value, so a generation is never given twice,
-- even after its row is deleted. Not owned by the table, so that dropping the
-- table does not restart it.
CREATE SEQUENCE IF NOT EXISTS __SCHEMA__.idempotency_generation_seq AS bigint;

-- One row per idempotency key. The key of the store is (caller, key): two
-- callers never see each other's records. Caller, key, fingerprint and
-- recovery point are stored as bytes, so any Go string (NUL bytes, invalid
-- UTF-8) round-trips. Times come from the database clock.
CREATE TABLE IF NOT EXISTS __SCHEMA__.idempotency_keys (
    caller         bytea       NOT NULL,
    key            bytea       NOT NULL,
    -- The row's identity in the primary key index: a caller or a key may be
    -- longer than an index entry can be (about 2.7 KB), a hash never is.
    -- sha256(caller) has a fixed length, so distinct (caller, key) pairs
    -- hash distinct inputs. Every query matches caller and key exactly as
    -- well, so even a hash collision could never mix two records.
    key_hash       bytea       GENERATED ALWAYS AS (sha256(sha256(caller) || key)) STORED,
    -- Fingerprint of the request that created the record (versioned by the caller).
    fingerprint    bytea       NOT NULL,
    -- 1 = in progress, 2 = completed (idempotency.Status).
    status         smallint    NOT NULL CHECK (status IN (1, 2)),
    -- Fencing counter: 1 when created, incremented by each takeover of a stale
    -- lease. Every write after a claim is conditional on it.
    attempt        bigint      NOT NULL CHECK (attempt >= 1),
    -- Identifies this incarnation of (caller, key), kept by takeovers: a
    -- paused holder of an earlier row of the key (released or expired, then
    -- claimed again at attempt 1) must not match the new row. Every write
    -- after a claim is conditional on it too.
    generation     bigint      NOT NULL DEFAULT nextval(__GENERATION_SEQ__),
    -- The lease: another claim may take over an in-progress row after this time.
    locked_until   timestamptz NOT NULL,
    -- The last recovery point saved ('' before the first) and its opaque data.
    recovery_point bytea       NOT NULL DEFAULT '',
    recovery_data  bytea,
    -- The opaque encoded outcome, set when status = 2.
    response       bytea,
    -- What a reconciler needs to run the execution again (the stored request,
    -- or the name and input of registered work), until it completes.
    resume         bytea,
    -- Why a reconciler gave up on the execution (NULL: it did not).
    parked         text,
    created_at     timestamptz NOT NULL,
    -- After this time the row behaves as absent; the sweeper deletes it.
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (key_hash)
);

-- Tables created before generations existed get the column; their rows get
-- distinct generations from the sequence. The probe takes no lock stronger
-- than a read's, so a migration of an up-to-date table never blocks traffic.
DO $add_generation$
BEGIN
    PERFORM generation FROM __SCHEMA__.idempotency_keys LIMIT 0;
EXCEPTION WHEN undefined_column THEN
    ALTER TABLE __SCHEMA__.idempotency_keys ADD COLUMN generation bigint NOT NULL
        DEFAULT nextval(__GENERATION_SEQ__);
END
$add_generation$;

-- Tables created before key_hash existed have the primary key (caller, key),
-- which cannot take a caller or key longer than an index entry, and keep
-- recovery points as text, which cannot take every Go string. One ALTER
-- TABLE (one rewrite of the table, under an exclusive lock) brings them up to
-- date, rows included. The probe takes no lock stronger than a read's, so a
-- migration of an up-to-date table never blocks traffic.
DO $add_key_hash$
BEGIN
    PERFORM key_hash FROM __SCHEMA__.idempotency_keys LIMIT 0;
EXCEPTION WHEN undefined_column THEN
    ALTER TABLE __SCHEMA__.idempotency_keys
        ADD COLUMN key_hash bytea GENERATED ALWAYS AS (sha256(sha256(caller) || key)) STORED,
        DROP CONSTRAINT idempotency_keys_pkey,
        ADD PRIMARY KEY (key_hash),
        ALTER COLUMN recovery_point DROP DEFAULT,
        ALTER COLUMN recovery_point TYPE bytea USING convert_to(recovery_point, 'UTF8'),
        ALTER COLUMN recovery_point SET DEFAULT '';
END
$add_key_hash$;

-- Tables created before the reconciler existed get its columns. The probe
-- takes no lock stronger than a read's, so a migration of an up-to-date
-- table never blocks traffic; adding nullable columns rewrites nothing.
DO $add_resume$
BEGIN
    PERFORM resume, parked FROM __SCHEMA__.idempotency_keys LIMIT 0;
EXCEPTION WHEN undefined_column THEN
    ALTER TABLE __SCHEMA__.idempotency_keys
        ADD COLUMN IF NOT EXISTS resume bytea,
        ADD COLUMN IF NOT EXISTS parked text;
END
$add_resume$;

-- The executions a reconciler looks for: begun, in progress, not parked, by
-- the end of their lease. Small: only the rows executing now.
DO $create_idempotency_keys_stalled_idx$
BEGIN
    -- Looked for first: CREATE INDEX IF NOT EXISTS locks the table before it
    -- looks, and Migrate on an up-to-date schema must take no lock that a
    -- serving instance's writes wait for.
    IF to_regclass(__SCHEMA_TEXT__ || '.idempotency_keys_stalled_idx') IS NULL THEN
        CREATE INDEX idempotency_keys_stalled_idx
            ON __SCHEMA__.idempotency_keys (locked_until) WHERE status = 1 AND recovery_point <> '' AND parked IS NULL;
    END IF;
END
$create_idempotency_keys_stalled_idx$;

-- The executions a reconciler gave up on, for ListParked: few, and only
-- while they stay parked.
DO $create_idempotency_keys_parked_idx$
BEGIN
    -- Looked for first: CREATE INDEX IF NOT EXISTS locks the table before it
    -- looks, and Migrate on an up-to-date schema must take no lock that a
    -- serving instance's writes wait for.
    IF to_regclass(__SCHEMA_TEXT__ || '.idempotency_keys_parked_idx') IS NULL THEN
        CREATE INDEX idempotency_keys_parked_idx
            ON __SCHEMA__.idempotency_keys (key_hash) WHERE status = 1 AND parked IS NOT NULL;
    END IF;
END
$create_idempotency_keys_parked_idx$;

DO $create_idempotency_keys_expires_at_idx$
BEGIN
    -- Looked for first: CREATE INDEX IF NOT EXISTS locks the table before it
    -- looks, and Migrate on an up-to-date schema must take no lock that a
    -- serving instance's writes wait for.
    IF to_regclass(__SCHEMA_TEXT__ || '.idempotency_keys_expires_at_idx') IS NULL THEN
        CREATE INDEX idempotency_keys_expires_at_idx
            ON __SCHEMA__.idempotency_keys (expires_at);
    END IF;
END
$create_idempotency_keys_expires_at_idx$;

-- Transactional outbox: follow-on messages written in the same transaction as
-- the effects that caused them, delivered at least once by a Relay.
CREATE TABLE IF NOT EXISTS __SCHEMA__.outbox (
    -- Delivery order.
    seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Stable message id, the same on every delivery of the message.
    id           uuid        NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    topic        text        NOT NULL,
    payload      bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    -- Failed deliveries so far, and the last failure.
    failures     integer     NOT NULL DEFAULT 0,
    last_error   text,
    -- Set when a Relay with MaxFailures gave up on the message; it is then
    -- skipped until parked_at is set back to NULL.
    parked_at    timestamptz
);

-- An outbox made before messages could be parked has no parked_at.
DO $add_parked_at$
BEGIN
    PERFORM parked_at FROM __SCHEMA__.outbox LIMIT 0;
EXCEPTION WHEN undefined_column THEN
    ALTER TABLE __SCHEMA__.outbox ADD COLUMN IF NOT EXISTS parked_at timestamptz;
END
$add_parked_at$;

DO $create_outbox_pending_idx$
BEGIN
    -- Looked for first: CREATE INDEX IF NOT EXISTS locks the table before it
    -- looks, and Migrate on an up-to-date schema must take no lock that a
    -- serving instance's writes wait for.
    IF to_regclass(__SCHEMA_TEXT__ || '.outbox_pending_idx') IS NULL THEN
        CREATE INDEX outbox_pending_idx
            ON __SCHEMA__.outbox (seq) WHERE delivered_at IS NULL AND parked_at IS NULL;
    END IF;
END
$create_outbox_pending_idx$;

DO $create_outbox_delivered_idx$
BEGIN
    -- Looked for first: CREATE INDEX IF NOT EXISTS locks the table before it
    -- looks, and Migrate on an up-to-date schema must take no lock that a
    -- serving instance's writes wait for.
    IF to_regclass(__SCHEMA_TEXT__ || '.outbox_delivered_idx') IS NULL THEN
        CREATE INDEX outbox_delivered_idx
            ON __SCHEMA__.outbox (delivered_at) WHERE delivered_at IS NOT NULL;
    END IF;
END
$create_outbox_delivered_idx$;

-- Raises SQLSTATE EO001 when a fenced write matched no row, so that a
-- pipelined COMMIT after it cannot run: the transaction aborts instead.
CREATE OR REPLACE FUNCTION __SCHEMA__.require_fence(matched bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF matched = 0 THEN
        RAISE EXCEPTION 'idempotency lease lost' USING ERRCODE = 'EO001';
    END IF;
    RETURN matched;
END
$$;
