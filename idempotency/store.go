package idempotency

import (
	"context"
	"errors"
	"time"
)

// State is where an idempotency record stands: in progress or completed.
type State int

const (
	// StateInProgress means an execution holds (or held) the lease and has not completed.
	StateInProgress State = iota + 1
	// StateCompleted means the outcome is stored and is replayed to every repeat.
	StateCompleted
)

// String returns "in_progress" or "completed".
func (s State) String() string {
	switch s {
	case StateInProgress:
		return "in_progress"
	case StateCompleted:
		return "completed"
	default:
		return "unknown"
	}
}

// Record is one stored idempotency key. The store key is (Caller, Key):
// two callers never see each other's records.
type Record struct {
	Caller      string
	Key         string
	Fingerprint string
	State       State
	// Attempt counts the executions of this record: 1 when created,
	// incremented by every takeover of a stale lease. Every write after a
	// claim is conditional on it (and on Generation).
	Attempt int64
	// Generation identifies this incarnation of (Caller, Key): a store gives
	// every record it creates a generation it never gave before to that
	// (Caller, Key), even after the record is released or expires and the key
	// is claimed again (a new record starts at Attempt 1 again, so Attempt
	// alone cannot tell it from the old one). A takeover keeps it. It is
	// never 0, so a Fence built without it matches nothing; its value has no
	// other meaning.
	Generation  int64
	LockedUntil time.Time
	// RecoveryPoint names the last recovery point saved ("" before the first).
	RecoveryPoint string
	// RecoveryData is opaque state saved with the recovery point (step results).
	RecoveryData []byte
	// Response is the opaque encoded outcome, set when State is StateCompleted.
	Response []byte
	// Resume is what a Reconciler needs to run the execution again (opaque:
	// ClaimRequest.Resume of the claim that created or took over the record),
	// or nil.
	Resume []byte
	// Parked says why a Reconciler gave up on the execution ("" when it did
	// not): a parked record is not taken over by TakeOverStalled again, but a
	// claim (its client's retry) still takes it over, which clears it.
	Parked    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ClaimRequest asks a Store to claim (Caller, Key) for one execution.
type ClaimRequest struct {
	Caller      string
	Key         string
	Fingerprint string
	// Lease is how long the claim holds before another claim may take it over.
	Lease time.Duration
	// TTL is how long the record lives from its creation.
	TTL time.Duration
	// Resume, if not nil, is stored with the record when the claim creates
	// it or takes it over (Record.Resume); a claim that finds the record
	// settled leaves it as it is.
	Resume []byte
	// Point, if not empty, is the recovery point (Record.RecoveryPoint) a
	// record created by this claim starts with, written in the same atomic
	// operation as the claim: the execution counts as begun from its claim
	// on, so TakeOverStalled takes it over once its lease runs out, whatever
	// dies when. A takeover keeps the record's own point, and gives it
	// Point only when it has none; a claim that finds the record settled
	// leaves it as it is.
	Point string
}

// ClaimOutcome says what a claim found.
type ClaimOutcome int

const (
	// ClaimCreated: no live record existed; a new in-progress record was created
	// with Attempt 1 and a new Generation. The caller owns the execution.
	ClaimCreated ClaimOutcome = iota + 1
	// ClaimTakenOver: an in-progress record whose lease had expired (and whose
	// fingerprint matched) was taken over; its Attempt was incremented and its
	// Generation and recovery point kept. The caller owns the execution and
	// resumes it.
	ClaimTakenOver
	// ClaimInProgress: another execution holds a live lease. Nothing changed,
	// except that a claim with ClaimRequest.Point gives a record without a
	// recovery point that point (and its Resume, when the record has none):
	// the execution stays the holder's, but the record now counts as begun.
	ClaimInProgress
	// ClaimCompleted: the record is completed; Record.Response holds the outcome.
	ClaimCompleted
	// ClaimMismatch: a live record exists with another fingerprint. Nothing changed.
	ClaimMismatch
)

// Claim is the result of Store.Claim: the outcome and the record as it is after the claim.
type Claim struct {
	Outcome ClaimOutcome
	Record  Record
	// lease is the lease the Runner claimed with (0: its own).
	lease time.Duration
}

// Fence identifies one execution's ownership of a record: Record.Fence of the
// claimed record. Writes made with a
// Fence succeed only while the record of (Caller, Key) is the same record
// (same Generation) and no other execution took it over (same Attempt).
type Fence struct {
	Caller     string
	Key        string
	Attempt    int64
	Generation int64
}

// Fence returns the fence of the execution that claimed r: its Caller, Key,
// Attempt and Generation.
func (r Record) Fence() Fence {
	return Fence{Caller: r.Caller, Key: r.Key, Attempt: r.Attempt, Generation: r.Generation}
}

// ErrLeaseLost is returned by a fenced write when the record's attempt counter
// moved on (another execution took over), or the record is gone (released,
// expired, or replaced by a new record of the same key). The write had no
// effect; the execution must stop.
var ErrLeaseLost = errors.New("idempotency: lease lost to a newer attempt")

// ErrNotFound is returned by Store.Get when no live record exists.
var ErrNotFound = errors.New("idempotency: record not found")

// Store keeps idempotency records. Implementations must be safe for concurrent
// use, and must pass the conformance suite in package storetest.
//
// Expired records (ExpiresAt in the past) behave as absent for Claim and Get
// even before DeleteExpired removes them. Times are the store's own clock
// (the database's for a shared store); callers pass durations, never instants.
//
// Fenced writes (SaveRecoveryPoint, Complete, Release, and Tx.Complete of a
// TxStore) apply only to an in-progress record whose Caller, Key, Attempt and
// Generation all equal the Fence's; otherwise they get ErrLeaseLost and change
// nothing. Matching the Generation keeps a paused execution from writing into
// a later record of its key: once its record was released or expired, a new
// claim creates a record with Attempt 1 again, but never with its Generation.
// Once a record is completed its outcome is final, and a second Complete, a
// late recovery point or a Release with the same fence get ErrLeaseLost.
// A claim's Record and Get's Record are copies: the caller may keep or modify
// their byte slices, and a store does not keep the slices passed to it.
type Store interface {
	// Claim atomically creates the record, takes over a stale in-progress
	// record with the same fingerprint, or reports what exists. Never a read
	// followed by a separate write.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	// SaveRecoveryPoint stores point and data and extends the lease by lease,
	// conditional on f. An empty point only extends the lease of a record
	// that has a recovery point (one a claim saved while f held the lease),
	// keeping its point and data. ErrLeaseLost when the fence no longer holds.
	SaveRecoveryPoint(ctx context.Context, f Fence, point string, data []byte, lease time.Duration) error
	// Complete stores the outcome and marks the record completed, conditional
	// on f. The record keeps its ExpiresAt. ErrLeaseLost when the fence no longer holds.
	Complete(ctx context.Context, f Fence, response []byte) error
	// Release deletes an in-progress record owned by f, freeing the key (a
	// rejection before execution began). ErrLeaseLost when the fence no longer holds.
	Release(ctx context.Context, f Fence) error
	// ReleaseUnstarted gives up the in-progress record owned by f, whose
	// execution saved no recovery point: it deletes the record, freeing the
	// key, as Release does, unless the record has a recovery point (a claim
	// with ClaimRequest.Point saved it while f held the lease); that record
	// is kept, its lease ended, for TakeOverStalled. ErrLeaseLost when the
	// fence no longer holds.
	ReleaseUnstarted(ctx context.Context, f Fence) error
	// Get returns the live record for (caller, key) or ErrNotFound.
	Get(ctx context.Context, caller, key string) (Record, error)
	// DeleteExpired removes up to limit expired records (limit <= 0: all) and
	// returns how many it removed. Safe to run from many instances at once.
	DeleteExpired(ctx context.Context, limit int) (int, error)
	// TakeOverStalled takes over up to limit stalled executions (limit <= 0:
	// a store's own bound) and returns them as a claim's takeover would:
	// live in-progress records whose lease has run out, that began executing
	// (RecoveryPoint is not ""), and that are not parked, each with its
	// Attempt incremented and a new lease of lease, atomically per record.
	// Those whose lease ran out first come first. With a caller other than
	// "", only that caller's records are taken over (and counted against
	// limit), and the records of every other caller are left as they are;
	// "" takes over those of every caller. Safe to run from many instances
	// at once: no record is returned to two of them for one lease, and a
	// record locked by another's takeover is skipped, not waited for.
	TakeOverStalled(ctx context.Context, caller string, limit int, lease time.Duration) ([]Record, error)
	// Park marks the in-progress record owned by f as given up with reason
	// (Record.Parked) and ends its lease, so TakeOverStalled skips it and the
	// next claim takes it over at once. ErrLeaseLost when the fence no longer
	// holds.
	Park(ctx context.Context, f Fence, reason string) error
	// ListParked returns up to limit live parked records (limit <= 0:
	// 100), in the order of their Caller, then their Key
	// (byte-wise, as Go compares strings), starting after (afterCaller,
	// afterKey): "" and "" for the first page, the last record's Caller
	// and Key for the next. It changes nothing.
	ListParked(ctx context.Context, afterCaller, afterKey string, limit int) ([]Record, error)
}

// defaultParkedPage is how many records Store.ListParked returns when given
// no limit.
const defaultParkedPage = 100

// TxStore is a Store that can complete a record in a transaction which also
// carries the execution's own local writes, so they commit or roll back together.
//
// While a Tx is open the execution still saves recovery points through the
// Store methods (outside the transaction, so they commit before an external
// call), so Begin must not take a lock that blocks SaveRecoveryPoint on the
// same record from another connection.
type TxStore interface {
	Store
	// Begin starts the transaction for the execution fenced by f.
	Begin(ctx context.Context, f Fence) (Tx, error)
}

// Tx is an open completion transaction from TxStore.Begin.
//
// A transaction in which a statement failed is never committed, not even in
// part: a failure of any kind counts (one the database reported, a context
// that ended, no connection to be had, a statement that never reached the
// database), except one undone by rolling back a savepoint it happened in.
// Err reports it; Runner.Do then rolls the transaction back and treats the
// attempt as failed, whatever the Work returned.
type Tx interface {
	// Context returns ctx carrying the transaction, for the execution's local
	// writes (each store documents how to take it out, e.g. pgstore.TxFrom).
	Context(ctx context.Context) context.Context
	// Err returns the error of the first statement made through the
	// transaction that failed, or nil.
	Err() error
	// Complete stores response, conditional on the fence, and commits. On
	// ErrLeaseLost (or any error) everything in the transaction is rolled
	// back. When Err is not nil it commits nothing and fails with an error
	// matching ErrTxFailed.
	Complete(ctx context.Context, response []byte) error
	// Rollback abandons the transaction. Safe to call after Complete (no-op).
	Rollback(ctx context.Context) error
}
