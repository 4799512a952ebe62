package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/exactlyonce/retry"
)

// ListState selects the executions a Lister lists, by where they stand now.
type ListState int

const (
	// ListInProgress: in progress, not parked, its lease still running.
	ListInProgress ListState = iota + 1
	// ListStalled: in progress, not parked, its lease run out (a Reconciler
	// takes it over if it began executing; a client's retry takes it over
	// in any case).
	ListStalled
	// ListParked: in progress and parked by a Reconciler (Record.Parked).
	ListParked
	// ListCompleted: completed, its outcome kept until its TTL runs out.
	ListCompleted
)

// listStates are the states a Lister lists, in the order a page shows them:
// ListInProgress to ListCompleted.
var listStates = []ListState{ListInProgress, ListStalled, ListParked, ListCompleted}

// String returns "in_progress", "stalled", "parked" or "completed".
func (s ListState) String() string {
	switch s {
	case ListInProgress:
		return "in_progress"
	case ListStalled:
		return "stalled"
	case ListParked:
		return "parked"
	case ListCompleted:
		return "completed"
	default:
		return "unknown"
	}
}

// MarshalText returns the state's name, as String writes it.
func (s ListState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText sets s to the ListState named text (as String writes it),
// or returns an error matching ErrInvalidList.
func (s *ListState) UnmarshalText(text []byte) error {
	for _, st := range listStates {
		if st.String() == string(text) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("%w: unknown state %q", ErrInvalidList, text)
}

// ListState returns the ListState of a live record at now, on the store's
// clock.
func (r Record) ListState(now time.Time) ListState {
	switch {
	case r.State == StateCompleted:
		return ListCompleted
	case r.Parked != "":
		return ListParked
	case r.LockedUntil.After(now):
		return ListInProgress
	default:
		return ListStalled
	}
}

// maxListPage is the largest page a Lister returns.
const maxListPage = 500

// listScan is how many records a Lister reads at most for one page.
const listScan = 2000

// ErrInvalidList is matched by the error of a ListQuery that can never
// succeed: an unknown state, a page size out of range, a malformed cursor.
var ErrInvalidList = retry.Permanent(errors.New("idempotency: invalid list query"))

// ListQuery asks a Lister for one page of live executions.
type ListQuery struct {
	// State selects the executions by where they stand. Required.
	State ListState
	// Caller, if not empty, lists only that caller's executions.
	Caller string
	// KeyPrefix, if not empty, lists only the keys that start with it.
	KeyPrefix string
	// Cursor is "" for the first page, or the ListPage.Next of the page
	// before. It is opaque, and means something only to the store that
	// made it.
	Cursor string
	// Limit is the largest number of records wanted, 1 to 500 (0: 100).
	Limit int
}

// Validate checks q, returning an error matching ErrInvalidList.
func (q ListQuery) Validate() error {
	switch {
	case q.State < ListInProgress || q.State > ListCompleted:
		return fmt.Errorf("%w: unknown state %d", ErrInvalidList, int(q.State))
	case q.Limit < 0 || q.Limit > maxListPage:
		return fmt.Errorf("%w: page size %d; want 1 to %d", ErrInvalidList, q.Limit, maxListPage)
	}
	return nil
}

// Matches reports whether a live record r is one q asks for at now.
func (q ListQuery) Matches(r Record, now time.Time) bool {
	return (q.Caller == "" || r.Caller == q.Caller) && strings.HasPrefix(r.Key, q.KeyPrefix) && r.ListState(now) == q.State
}

// ScanSize returns how many records a Lister reads at most for one page
// of q: 2000. A page of records that mostly do not match the query comes
// back short (even empty) with a cursor to go on from, so no page reads
// the whole store.
func (ListQuery) ScanSize() int { return listScan }

// PageSize returns q.Limit, or 100 (the default) when it is 0.
func (q ListQuery) PageSize() int {
	if q.Limit == 0 {
		return defaultParkedPage
	}
	return q.Limit
}

// ListPage is one page of a Lister's list.
type ListPage struct {
	// Records are the executions found, at most the query's Limit.
	Records []Record
	// Next is the cursor of the next page, or "" when the list ended. A
	// page may be short, even empty, and still have a Next: a page reads
	// at most ListQuery.ScanSize records of the store.
	Next string
	// Now is the store's clock when it read the page, by which the records'
	// states were judged.
	Now time.Time
}

// Lister is a Store that can list its live executions by state, for an
// operator's page: bounded pages, a cursor to go on from, and never a read
// of the whole store for one page. Every store of this module implements
// it. A record that changes state while an operator pages may show on two
// pages or on none; an unchanged record shows on exactly one (on Redis, at
// least one: its scan may return a record twice).
type Lister interface {
	Store
	// List returns one page of the live executions q selects. A query
	// that fails Validate, or has a cursor the store did not make, gets an
	// error matching ErrInvalidList.
	List(ctx context.Context, q ListQuery) (ListPage, error)
	// Now returns the store's clock, by which it judges leases and
	// expiry (the database's for a shared store).
	Now(ctx context.Context) (time.Time, error)
}
