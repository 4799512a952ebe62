-- Schema of the exactlyonce MySQL/MariaDB store.
--
-- __PREFIX__ stands for the table prefix; Migrate and SchemaSQL replace it.
-- Every statement is idempotent, so the file can be applied again safely.
-- Statements are separated by a line holding only a semicolon.

-- One row per idempotency key. The key of the store is (caller, key): two
-- callers never see each other's records. Caller, key, fingerprint, recovery
-- point and parked reason are bytes (BLOBs compare byte-wise), so any Go
-- string (NUL bytes, invalid UTF-8) round-trips. Times are microseconds since
-- the Unix epoch, from the database clock (UTC_TIMESTAMP(6)): no time zone,
-- no daylight saving, no 2038.
CREATE TABLE IF NOT EXISTS `__PREFIX__idempotency_keys` (
    -- The row's identity in the primary key: a caller or a key may be longer
    -- than an index entry can be (3,072 bytes), a hash never is. SHA-256 of
    -- the caller's length, the caller and the key, made by the store. Every
    -- query matches caller and key exactly as well, so even a hash collision
    -- could never mix two records.
    id             BINARY(32) NOT NULL,
    caller         MEDIUMBLOB NOT NULL,
    `key`          MEDIUMBLOB NOT NULL,
    -- Fingerprint of the request that created the record.
    fingerprint    MEDIUMBLOB NOT NULL,
    -- 1 = in progress, 2 = completed (idempotency.State).
    status         TINYINT    NOT NULL,
    -- Fencing counter: 1 when created, incremented by each takeover of a
    -- stale lease. Every write after a claim is conditional on it.
    attempt        BIGINT     NOT NULL,
    -- Identifies this incarnation of (caller, key), kept by takeovers, drawn
    -- from idempotency_generations: never given twice. Every write after a
    -- claim is conditional on it too.
    generation     BIGINT     NOT NULL,
    -- The lease: another claim may take over an in-progress row from then.
    locked_until   BIGINT     NOT NULL,
    -- The last recovery point saved ('' before the first) and its data.
    recovery_point MEDIUMBLOB NOT NULL,
    recovery_data  LONGBLOB,
    -- The opaque encoded outcome, set when status = 2.
    response       LONGBLOB,
    -- What a reconciler needs to run the execution again, until it completes.
    resume         LONGBLOB,
    -- Why a reconciler gave up on the execution (NULL: it did not).
    parked         MEDIUMBLOB,
    created_at     BIGINT     NOT NULL,
    -- From then on the row behaves as absent; the sweeper deletes it.
    expires_at     BIGINT     NOT NULL,
    -- The executions a reconciler looks for (begun, in progress, not
    -- parked), by the end of their lease; NULL for every other row, so the
    -- index holds only the rows executing now.
    stalled_at     BIGINT AS (IF(status = 1 AND recovery_point <> '' AND parked IS NULL, locked_until, NULL)) STORED,
    -- The executions a reconciler gave up on, for ListParked.
    parked_id      BINARY(32) AS (IF(status = 1 AND parked IS NOT NULL, id, NULL)) STORED,
    PRIMARY KEY (id),
    KEY idempotency_keys_expires_at (expires_at),
    KEY idempotency_keys_stalled (stalled_at),
    KEY idempotency_keys_parked (parked_id)
) ENGINE = InnoDB
;
-- The generations still to give: each store takes a block at a time.
CREATE TABLE IF NOT EXISTS `__PREFIX__idempotency_generations` (
    id   TINYINT NOT NULL PRIMARY KEY,
    next BIGINT  NOT NULL
) ENGINE = InnoDB
;
INSERT IGNORE INTO `__PREFIX__idempotency_generations` (id, next) VALUES (1, 1)
