package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/go-sql-driver/mysql"
)

// claimTries bounds how often Claim reads again after its write found that
// another claim changed the record since the read.
const claimTries = 10

// errDuplicateKey is MySQL's ER_DUP_ENTRY.
const errDuplicateKey = 1062

// lostRace reports whether err says that a claim's write, made on its own
// (autocommit), met another claim of the same key and kept nothing, so the
// claim reads again: a duplicate key, or a deadlock, which InnoDB makes of
// inserts of one key that waited on a third transaction's insert of it
// that rolled back (each holds a shared lock on the row and wants an
// exclusive one) and answers by rolling the victim's statement back.
func lostRace(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errDuplicateKey || me.Number == errDeadlock)
}

// Claim reads the record of (caller, key) with the database clock, without
// a lock (a consistent read): a completed, live in-progress or mismatching
// record is reported as it is, in one round trip, and nothing is written.
// Otherwise one conditional write makes the claim: an INSERT creates the
// record (Attempt 1, a new Generation, recovery point req.Point); an UPDATE
// conditional on the generation read and on expiry replaces an expired one
// (likewise); or an UPDATE conditional on the attempt and generation read,
// the fingerprint and the lease having run out takes a stale in-progress
// record over (Attempt+1, Generation and recovery point kept, or req.Point
// if it has none). A duplicate key (or a deadlock of two inserts of the
// key), or an UPDATE that matched no row, means another claim changed the
// record since the read, and Claim reads again.
// Lease and expiry run from the clock of the read.
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	if req.Lease <= 0 || req.TTL <= 0 {
		return idempotency.Claim{}, retry.Permanent(fmt.Errorf("mysqlstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
	}
	id := recordID(req.Caller, req.Key)
	for range claimTries {
		now, rec, found, err := s.claimRead(ctx, id, req)
		if err != nil {
			return idempotency.Claim{}, fmt.Errorf("mysqlstore: claim: %w", classify(err))
		}
		live := found && rec.ExpiresAt.UnixMicro() > now
		switch {
		case live && rec.Fingerprint != req.Fingerprint:
			return idempotency.Claim{Outcome: idempotency.ClaimMismatch, Record: rec}, nil
		case live && rec.State == idempotency.StateCompleted:
			return idempotency.Claim{Outcome: idempotency.ClaimCompleted, Record: rec}, nil
		case live && rec.LockedUntil.UnixMicro() > now && rec.RecoveryPoint == "" && req.Point != "":
			c, ok, err := s.mark(ctx, id, rec, req)
			if err != nil || ok {
				return c, err
			}
		case live && rec.LockedUntil.UnixMicro() > now:
			return idempotency.Claim{Outcome: idempotency.ClaimInProgress, Record: rec}, nil
		case live:
			c, ok, err := s.takeOver(ctx, id, now, rec, req)
			if err != nil || ok {
				return c, err
			}
		default:
			c, ok, err := s.create(ctx, id, now, found, rec, req)
			if err != nil || ok {
				return c, err
			}
		}
	}
	return idempotency.Claim{}, fmt.Errorf("mysqlstore: claim: the record kept changing, %d tries", claimTries)
}

// claimRead reads the clock and the record, if there is one.
func (s *Store) claimRead(ctx context.Context, id []byte, req idempotency.ClaimRequest) (now int64, rec idempotency.Record, found bool, err error) {
	var (
		status                                  sql.NullInt16
		attempt, gen, lu, ca, ex                sql.NullInt64
		caller, key, fingerprint, point, parked []byte
	)
	err = s.db.QueryRowContext(ctx, s.q.claimRead, s.shiftArg(), id, []byte(req.Caller), []byte(req.Key)).Scan(&now,
		&caller, &key, &fingerprint, &status, &attempt, &gen, &lu, &point, &rec.RecoveryData, &rec.Response, &rec.Resume,
		&parked, &ca, &ex)
	if err != nil || !status.Valid {
		return now, idempotency.Record{}, false, err
	}
	rec.Attempt, rec.Generation = attempt.Int64, gen.Int64
	fill(&rec, caller, key, fingerprint, status.Int16, lu.Int64, point, parked, ca.Int64, ex.Int64)
	return now, rec, true, nil
}

// create makes a new record of req, or replaces the expired one read
// (found), with a lease and expiry from now. ok is false when another claim
// got there first.
func (s *Store) create(ctx context.Context, id []byte, now int64, found bool, old idempotency.Record, req idempotency.ClaimRequest) (idempotency.Claim, bool, error) {
	gen, err := s.newGeneration(ctx)
	if err != nil {
		return idempotency.Claim{}, false, fmt.Errorf("mysqlstore: claim: %w", err)
	}
	rec := idempotency.Record{
		Caller: req.Caller, Key: req.Key, Fingerprint: req.Fingerprint,
		State: idempotency.StateInProgress, Attempt: 1, Generation: gen,
		LockedUntil:   fromMicros(now + req.Lease.Microseconds()),
		RecoveryPoint: req.Point,
		Resume:        clone(req.Resume),
		CreatedAt:     fromMicros(now), ExpiresAt: fromMicros(now + req.TTL.Microseconds()),
	}
	lu, ex := rec.LockedUntil.UnixMicro(), rec.ExpiresAt.UnixMicro()
	var res sql.Result
	if found {
		res, err = s.db.ExecContext(ctx, s.q.replace, []byte(req.Fingerprint), gen, lu, req.Point, req.Resume, now, ex,
			id, []byte(req.Caller), []byte(req.Key), old.Generation, s.shiftArg())
	} else {
		res, err = s.db.ExecContext(ctx, s.q.insert, id, []byte(req.Caller), []byte(req.Key), []byte(req.Fingerprint),
			gen, lu, req.Point, req.Resume, now, ex)
	}
	if lostRace(err) {
		return idempotency.Claim{}, false, nil
	}
	if n, err := affected(res, err); err != nil || n == 0 {
		return idempotency.Claim{}, false, err
	}
	return idempotency.Claim{Outcome: idempotency.ClaimCreated, Record: rec}, true, nil
}

// takeOver takes over the stale in-progress record read, with a lease from
// now. ok is false when the record changed since the read.
func (s *Store) takeOver(ctx context.Context, id []byte, now int64, rec idempotency.Record, req idempotency.ClaimRequest) (idempotency.Claim, bool, error) {
	lu := now + req.Lease.Microseconds()
	res, err := s.execAlone(ctx, s.q.takeOver, lu, req.Resume, req.Point, id, []byte(req.Caller), []byte(req.Key),
		rec.Attempt, rec.Generation, []byte(req.Fingerprint), s.shiftArg(), s.shiftArg())
	if n, err := affected(res, err); err != nil || n == 0 {
		return idempotency.Claim{}, false, err
	}
	rec.Attempt++
	rec.LockedUntil = fromMicros(lu)
	rec.Parked = ""
	if req.Resume != nil {
		rec.Resume = clone(req.Resume)
	}
	if rec.RecoveryPoint == "" {
		rec.RecoveryPoint = req.Point
	}
	return idempotency.Claim{Outcome: idempotency.ClaimTakenOver, Record: rec}, true, nil
}

// mark gives the in-progress record read, held by another execution's
// live lease, the claim's recovery point (and resume, if it has none),
// leaving the execution to its holder. ok is false when the record changed
// since the read.
func (s *Store) mark(ctx context.Context, id []byte, rec idempotency.Record, req idempotency.ClaimRequest) (idempotency.Claim, bool, error) {
	res, err := s.execAlone(ctx, s.q.mark, []byte(req.Point), req.Resume, id, []byte(req.Caller), []byte(req.Key),
		rec.Attempt, rec.Generation, []byte(req.Fingerprint), s.shiftArg(), s.shiftArg())
	if n, err := affected(res, err); err != nil || n == 0 {
		return idempotency.Claim{}, false, err
	}
	rec.RecoveryPoint = req.Point
	if rec.Resume == nil {
		rec.Resume = clone(req.Resume)
	}
	return idempotency.Claim{Outcome: idempotency.ClaimInProgress, Record: rec}, true, nil
}

// affected returns the rows a claim's write matched.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: claim: %w", classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: claim: %w", err)
	}
	return n, nil
}
