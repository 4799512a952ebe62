package mysqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/go-sql-driver/mysql"
)

// Store is an idempotency.TxStore backed by MySQL or MariaDB through
// go-sql-driver/mysql. It is safe for concurrent use by many goroutines and
// many processes sharing one database: a claim is a read and one
// conditional write, every later write is fenced by the record's attempt
// counter and generation and checked by the rows it matched, and all times
// come from the database clock.
type Store struct {
	db     *sql.DB
	shift  *TimeShift
	q      queries
	gens   generations
	prefix string
}

var (
	_ idempotency.Store   = (*Store)(nil)
	_ idempotency.TxStore = (*Store)(nil)
)

// validPrefix is what a table prefix may be.
var validPrefix = regexp.MustCompile(`^[A-Za-z0-9_]{0,32}$`)

// Open returns a Store on the database cfg names, whose tables Migrate has
// made, with a pool of connections of its own (DB returns it; Close closes
// it). cfg is not changed: the store's copy reports the rows an UPDATE
// matched rather than those it changed (ClientFoundRows), so that a fenced
// write that sets a value it already had is not taken for a lost lease;
// and interpolates arguments into statements (InterpolateParams), so that a
// statement with arguments is one round trip, not three. Its connections
// also see every failure of the statements a completion transaction runs
// (see TxFrom).
func Open(cfg *mysql.Config, opts ...Option) (*Store, error) {
	if cfg == nil {
		return nil, errors.New("mysqlstore: nil config")
	}
	c := config{prefix: DefaultTablePrefix}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if !validPrefix.MatchString(c.prefix) {
		return nil, fmt.Errorf("mysqlstore: table prefix %q: letters, digits and underscores, at most 32", c.prefix)
	}
	connector, err := newConnector(cfg)
	if err != nil {
		return nil, err
	}
	return &Store{db: sql.OpenDB(connector), shift: c.shift, q: buildQueries(c.prefix), prefix: c.prefix}, nil
}

// newConnector makes the store's connector for cfg.
func newConnector(cfg *mysql.Config) (trackingConnector, error) {
	cfg = cfg.Clone()
	cfg.ClientFoundRows = true
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return trackingConnector{}, fmt.Errorf("mysqlstore: %w", err)
	}
	return trackingConnector{inner: connector}, nil
}

// DB returns the store's pool. Size it with SetMaxOpenConns and the like.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the store's pool.
func (s *Store) Close() error { return s.db.Close() }

// shiftArg is the argument of @now: the test time shift in microseconds.
func (s *Store) shiftArg() int64 { return s.shift.offsetMicros() }

// recordID is the primary key of (caller, key): SHA-256 of the caller's
// length, the caller and the key.
func recordID(caller, key string) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(caller)))])
	h.Write([]byte(caller))
	h.Write([]byte(key))
	return h.Sum(nil)
}

// fenceArgs are the arguments of fencedWhere for f.
func (s *Store) fenceArgs(f idempotency.Fence) []any {
	return []any{recordID(f.Caller, f.Key), []byte(f.Caller), []byte(f.Key), f.Attempt, f.Generation, s.shiftArg()}
}

// Get returns the live record for (caller, key), or idempotency.ErrNotFound.
func (s *Store) Get(ctx context.Context, caller, key string) (idempotency.Record, error) {
	rec, err := scanRecord(s.db.QueryRowContext(ctx, s.q.get, recordID(caller, key), []byte(caller), []byte(key), s.shiftArg()))
	if errors.Is(err, sql.ErrNoRows) {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("mysqlstore: get: %w", classify(err))
	}
	return rec, nil
}

// SaveRecoveryPoint stores point and data and extends the lease by lease,
// conditional on f, committed on its own (never in the completion
// transaction), so it is durable before the external call it brackets.
func (s *Store) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	p := []byte(point)
	return s.fenced(ctx, "save recovery point", s.q.save, append([]any{p, data, p, p, s.shiftArg(), lease.Microseconds()}, s.fenceArgs(f)...))
}

// Complete stores response and marks the record completed, conditional on f.
func (s *Store) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	return s.fenced(ctx, "complete", s.q.complete, append([]any{nonNil(response)}, s.fenceArgs(f)...))
}

// Release deletes the in-progress record owned by f, freeing the key.
func (s *Store) Release(ctx context.Context, f idempotency.Fence) error {
	return s.fenced(ctx, "release", s.q.release, s.fenceArgs(f))
}

// ReleaseUnstarted deletes the in-progress record owned by f if it has no
// recovery point; one that got one (from a claim made while f held the
// lease) is kept, its lease ended, for TakeOverStalled. A point is never
// removed while the fence holds, so when the delete finds one the update
// that follows does too.
func (s *Store) ReleaseUnstarted(ctx context.Context, f idempotency.Fence) error {
	err := s.fenced(ctx, "release", s.q.releaseUnstarted, s.fenceArgs(f))
	if !errors.Is(err, idempotency.ErrLeaseLost) {
		return err
	}
	return s.fenced(ctx, "release", s.q.endStartedLease, append([]any{s.shiftArg()}, s.fenceArgs(f)...))
}

// Park marks the record f owns as given up with reason and ends its lease,
// conditional on f. The reason is kept as bytes, as it is.
func (s *Store) Park(ctx context.Context, f idempotency.Fence, reason string) error {
	if reason == "" {
		reason = "parked"
	}
	return s.fenced(ctx, "park", s.q.park, append([]any{[]byte(reason), s.shiftArg()}, s.fenceArgs(f)...))
}

// fenced runs a fenced write: no row matched means the fence no longer holds.
func (s *Store) fenced(ctx context.Context, op, query string, args []any) error {
	return fencedResult(op)(s.execAlone(ctx, query, args...))
}

// execAlone runs a write on its own (autocommit). InnoDB may choose it as
// the victim of a deadlock (a write of a record's row and its index
// entries meeting a statement that locks them in the other order, as a
// takeover through the stalled index does); the victim is rolled back
// whole and kept nothing, so the write runs again, txTries times at most.
func (s *Store) execAlone(ctx context.Context, query string, args ...any) (sql.Result, error) {
	for try := 1; ; try++ {
		res, err := s.db.ExecContext(ctx, query, args...)
		var me *mysql.MySQLError
		if try < txTries && ctx.Err() == nil && errors.As(err, &me) && me.Number == errDeadlock {
			continue
		}
		return res, err
	}
}

// fencedResult turns the result of a fenced write into an error.
func fencedResult(op string) func(sql.Result, error) error {
	return func(res sql.Result, err error) error {
		if err != nil {
			return fmt.Errorf("mysqlstore: %s: %w", op, classify(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("mysqlstore: %s: %w", op, err)
		}
		if n == 0 {
			return idempotency.ErrLeaseLost
		}
		return nil
	}
}

// nonNil is b, or an empty slice for nil: a completed record's response is
// never NULL, so that an empty outcome is still an outcome.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// scanner is a row or rows.
type scanner interface{ Scan(dest ...any) error }

// scanRecord reads one row of recordColumns, after the columns of lead.
func scanRecord(row scanner, lead ...any) (idempotency.Record, error) {
	var (
		r                                       idempotency.Record
		status                                  int16
		caller, key, fingerprint, point, parked []byte
		lockedUntil, createdAt, expiresAt       int64
	)
	err := row.Scan(append(lead, &caller, &key, &fingerprint, &status, &r.Attempt, &r.Generation, &lockedUntil,
		&point, &r.RecoveryData, &r.Response, &r.Resume, &parked, &createdAt, &expiresAt)...)
	if err != nil {
		return idempotency.Record{}, err
	}
	fill(&r, caller, key, fingerprint, status, lockedUntil, point, parked, createdAt, expiresAt)
	return r, nil
}

// fill sets the fields of r read as bytes and numbers.
func fill(r *idempotency.Record, caller, key, fingerprint []byte, status int16, lockedUntil int64, point, parked []byte,
	createdAt, expiresAt int64) {
	r.Caller, r.Key, r.Fingerprint, r.RecoveryPoint = string(caller), string(key), string(fingerprint), string(point)
	r.State = idempotency.State(status)
	r.LockedUntil = time.UnixMicro(lockedUntil)
	r.Parked = string(parked)
	r.CreatedAt, r.ExpiresAt = time.UnixMicro(createdAt), time.UnixMicro(expiresAt)
	if len(r.RecoveryData) == 0 {
		r.RecoveryData = nil
	}
	if len(r.Resume) == 0 {
		r.Resume = nil
	}
	if r.State == idempotency.StateCompleted {
		r.Response = nonNil(r.Response)
	}
}

// fromMicros is the time of a microsecond count since the Unix epoch.
func fromMicros(us int64) time.Time { return time.UnixMicro(us) }

// clone copies b (nil stays nil).
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
