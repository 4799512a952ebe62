package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is an idempotency.TxStore backed by PostgreSQL through a pgx pool.
// It is safe for concurrent use by many goroutines and many processes sharing
// one database: every claim is a single atomic statement, every later write is
// fenced by the record's attempt counter and generation, and all times come
// from the database clock.
type Store struct {
	pool  *pgxpool.Pool
	shift *TimeShift
	q     queries
	bq    batchQueries
	lq    listQueries
}

var (
	_ idempotency.Store   = (*Store)(nil)
	_ idempotency.TxStore = (*Store)(nil)
)

// New returns a Store using pool, whose tables Migrate has created. It
// asks the database (within 2 s) whether they exist, and fails with an
// error matching ErrNotMigrated that names the command to create them
// when they do not; a database it cannot reach then is not checked. The
// pool stays the caller's: close it after the last use of the Store.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	c := config{schema: DefaultSchema}
	for _, o := range opts {
		if o == nil {
			continue
		}
		o.apply(&c)
	}
	if c.schema == "" {
		c.schema = DefaultSchema // as Migrate takes an empty name
	}
	if err := checkSchema(pool, c.schema); err != nil {
		return nil, err
	}
	schema := pgx.Identifier{c.schema}.Sanitize()
	return &Store{pool: pool, shift: c.shift, q: buildQueries(schema), bq: buildBatchQueries(schema), lq: buildListQueries(schema)}, nil
}

// Pool returns the pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// now is the query argument added to now(), in microseconds.
func (s *Store) now() int64 { return s.shift.offsetMicros() }

// Get returns the live record for (caller, key), or idempotency.ErrNotFound.
func (s *Store) Get(ctx context.Context, caller, key string) (idempotency.Record, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, s.q.get, []byte(caller), []byte(key), s.now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("pgstore: get: %w", classify(err))
	}
	return rec, nil
}

// SaveRecoveryPoint stores point and data and extends the lease by lease,
// conditional on f, committed on its own (not in any open transaction), so it
// is durable before the external call it brackets.
func (s *Store) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, s.q.saveRecoveryPoint, []byte(f.Caller), []byte(f.Key), f.Attempt, []byte(point), data, lease.Microseconds(), f.Generation, s.now())
	return fenced("save recovery point", tag, err)
}

// Complete stores response and marks the record completed, conditional on f.
func (s *Store) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	tag, err := s.pool.Exec(ctx, s.q.complete, []byte(f.Caller), []byte(f.Key), f.Attempt, response, f.Generation, s.now())
	return fenced("complete", tag, err)
}

// Release deletes the in-progress record owned by f, freeing the key.
func (s *Store) Release(ctx context.Context, f idempotency.Fence) error {
	tag, err := s.pool.Exec(ctx, s.q.release, []byte(f.Caller), []byte(f.Key), f.Attempt, f.Generation, s.now())
	return fenced("release", tag, err)
}

// ReleaseUnstarted deletes the in-progress record owned by f if it has no
// recovery point; one that got one (from a claim made while f held the
// lease) is kept, its lease ended, for TakeOverStalled. A point is never
// removed while the fence holds, so when the delete finds one the update
// that follows does too.
func (s *Store) ReleaseUnstarted(ctx context.Context, f idempotency.Fence) error {
	tag, err := s.pool.Exec(ctx, s.q.releaseUnstarted, []byte(f.Caller), []byte(f.Key), f.Attempt, f.Generation, s.now())
	if err != nil || tag.RowsAffected() > 0 {
		return fenced("release", tag, err)
	}
	tag, err = s.pool.Exec(ctx, s.q.endStartedLease, []byte(f.Caller), []byte(f.Key), f.Attempt, f.Generation, s.now())
	return fenced("release", tag, err)
}

// fenced turns the result of a fenced write into an error: zero rows means the
// fence no longer holds.
func fenced(op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// scanRecord reads one row of recordColumns, after the columns of lead.
func scanRecord(row pgx.Row, lead ...any) (idempotency.Record, error) {
	var (
		r                               idempotency.Record
		status                          int16
		caller, key, fingerprint, point []byte
		parked                          *string
	)
	err := row.Scan(append(lead, &caller, &key, &fingerprint, &status, &r.Attempt, &r.Generation, &r.LockedUntil,
		&point, &r.RecoveryData, &r.Response, &r.Resume, &parked, &r.CreatedAt, &r.ExpiresAt)...)
	r.Caller, r.Key, r.Fingerprint, r.RecoveryPoint = string(caller), string(key), string(fingerprint), string(point)
	if parked != nil {
		r.Parked = *parked
	}
	r.State = idempotency.State(status)
	return r, err
}
