package retry

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"
	"golang.org/x/time/rate"
)

// Limits of the clamps applied by NewBudget.
const (
	minBudgetCapacity = 1.0 // one token, one retry
	maxBudgetCapacity = 1e9
)

// budgetUnit is the number of fixed-point units in one token: the bucket
// counts millionths of a token in an int64.
const budgetUnit = 1_000_000

// budgetStripeSize is the size of one stripe of counters, two cache lines so
// that stripes in use by different processors do not share one, even with
// adjacent-line prefetching.
const budgetStripeSize = 128

// budgetMaxStripes bounds the number of counter stripes of a Budget.
const budgetMaxStripes = 64

// Budget is a retry budget: a token bucket that bounds retries to a fraction
// of traffic, so that retrying does not amplify an outage.
//
// It earns as gRPC's retry throttle does: each successful logical request
// (Succeeded) earns ratio tokens, up to the capacity, and each retry
// (AllowRetry) spends one whole token. When a request that Do or a
// Transport retried succeeds in the end, its retries get their tokens back
// (up to the capacity, counted in RetriesRefunded): they were worth their
// cost. Independent failures (a brownout, where a retry usually works) are
// then retried as long as retries keep working, while retries into a
// failing dependency, which never lead to a success, are bounded as below. The bucket starts full. When it holds
// less than one token, a floor of floorPerSecond retries per second still
// applies, through a golang.org/x/time/rate Limiter with a burst of 1 (no
// floor at all when floorPerSecond is 0). Unlike gRPC's throttle, retries are
// allowed down to the last whole token rather than stopping at half capacity,
// and failures that are not retried cost nothing.
//
// # Bound
//
// Let S be the number of Succeeded calls, and let every AllowRetry call carry
// a time in [t0, t1]. Then, with ratio and capacity as clamped below,
//
//	RetriesAllowed - RetriesRefunded <= capacity + ratio*S + floorPerSecond*(t1-t0 in seconds) + burst
//
// where burst is 1 when floorPerSecond > 0 and 0 otherwise. This holds
// whatever the order of the calls and the times, and under concurrency. It is
// the sum of two bounds, one per source of retries:
//
//	RetriesAllowed - FloorAllowed - RetriesRefunded <= floor(capacity + ratio*S)
//	FloorAllowed                                    <= 1 + floor(floorPerSecond * (t1 - tf))
//
// where tf is the time of the first retry that the bucket could not pay for
// (the floor's first grant; the floor starts with its burst of 1 available).
// (A refund is a token given back, so it adds to what the bucket may pay.)
// Both are equalities in a total outage (S = 0, so no refund) in which retries keep being
// asked for, at least at every multiple of 1/floorPerSecond seconds after tf:
// then RetriesAllowed = floor(capacity) + 1 + floor(floorPerSecond*(t1 - tf))
// exactly. (The floor's Limiter computes in float64; times and rates whose
// products are exact in binary, such as 1 retry/s and millisecond steps,
// give the exact figures.)
//
// # Arguments
//
// Bad arguments are clamped, never a panic:
//
//   - capacity (20 in a Transport's own budget): NaN and
//     values below minBudgetCapacity become minBudgetCapacity; values above
//     maxBudgetCapacity, +Inf included, become maxBudgetCapacity.
//   - ratio: NaN and negative values become 0 (only the initial tokens and
//     the floor); values above the capacity become the capacity (one success
//     refills the bucket).
//   - floorPerSecond: NaN, 0 and negative values mean no floor; +Inf means
//     every retry that the bucket cannot pay for is allowed by the floor
//     (the budget then only counts).
//
// Capacity and ratio are rounded to the nearest millionth of a token.
//
// # Use
//
// A nil *Budget is valid and unlimited: AllowRetry reports true, Succeeded
// and Requested do nothing and Stats returns the zero value. The zero Budget
// is valid too, but, like the zero rate.Limiter, it rejects every retry: its
// capacity is 0 and it has no floor; make budgets with NewBudget. A Budget
// must not be copied after first use.
//
// A Budget is safe for concurrent use and can be shared by many Transports
// and Do calls. Nothing allocates. Succeeded, Requested, and AllowRetry
// while the bucket holds a whole token (or when there is no floor), are
// lock-free: atomic operations on the token count, held in fixed point, and
// on statistics counters spread over stripes; only asking the floor takes the
// Limiter's lock. Time is always an argument, never read from the system
// clock, so that a fake clock makes the budget exact in tests.
type Budget struct {
	_      [budgetStripeSize]byte // keep tokens off the cache line of other data
	tokens atomic.Int64           // millionths of a token, in [0, capacity] but for takes in flight
	_      [budgetStripeSize - 8]byte

	capacity int64         // millionths of a token, >= budgetUnit
	ratio    int64         // millionths of a token earned per success, in [0, capacity]
	floor    *rate.Limiter // nil: no floor
	mask     uint32        // len(stripes) - 1
	stripes  []budgetStripe
	zero     budgetStripe // the only stripe of the zero Budget
	gate     atomic.Pointer[dependency]
}

// budgetStripe is one set of statistics counters. A Budget spreads its
// counters over several stripes, one per goroutine as far as possible, so
// that parallel callers do not all write to one cache line; Stats sums them.
type budgetStripe struct {
	requests     atomic.Uint64
	successes    atomic.Uint64
	allowed      atomic.Uint64
	floorAllowed atomic.Uint64
	denied       atomic.Uint64
	refunded     atomic.Uint64
	_            [budgetStripeSize - 6*8]byte
}

// NewBudget returns a full retry budget that holds capacity tokens, earns
// ratio tokens per success, spends one per retry, and allows floorPerSecond
// retries per second when it is empty. See Budget for the exact bound and
// the clamps.
//
// NewBudget(0.1, 1, 20) is the budget every Transport, protocol.Caller and grpcretry
// client makes for itself unless WithBudget gives one: retries held to 10% of
// successful traffic (the SRE book's per-client figure), 1 retry per second
// when empty, 20 tokens to start. Make one of these to share among the
// callers of one dependency. With them, healthy traffic has every transient
// failure retried and a total outage costs at most 1.10 attempts per
// logical request:
//
//   - Healthy traffic. A logical request that succeeds earns 0.1 token and
//     each retry spends 1, so on average the bucket refills as long as there
//     are fewer than 0.1 retries per success: a failure rate f of attempts
//     with f/(1-f) < 0.1, up to about 9%. At 5% random failures the bucket
//     drifts back to full after every failure; what can empty it is a
//     cluster of failures, and the capacity is sized for those. With 10
//     tokens, random clusters at 5% still empty the bucket about once per
//     250,000 failures (then the floor usually, not always, covers the
//     retry); with 20, simulations of 160 million requests (8 million
//     failures) never went below 9 tokens nor used the floor.
//   - Total outage. No request succeeds, so the bucket allows its 20 tokens,
//     then the floor allows 1 retry when the bucket runs dry and 1 per second
//     after that. N requests over T seconds cost at most N + 21 + T attempts,
//     which is at most 1.10 N as long as N >= 10 (21 + T): 2,000 requests
//     may take up to 179 seconds. In other words the 10% bound holds once
//     outage traffic exceeds about 10 requests per second; below that the
//     floor dominates, which is its purpose (a slow client still probes a
//     server that may have recovered).
func NewBudget(ratio, floorPerSecond, capacity float64) *Budget {
	fixedCapacity := budgetFixed(budgetClamp(capacity, minBudgetCapacity, maxBudgetCapacity, minBudgetCapacity))
	r := budgetFixed(budgetClamp(ratio, 0, maxBudgetCapacity, 0))
	r = min(r, fixedCapacity)

	b := &Budget{capacity: fixedCapacity, ratio: r}
	b.tokens.Store(fixedCapacity)
	switch {
	case math.IsInf(floorPerSecond, 1):
		b.floor = rate.NewLimiter(rate.Inf, 1)
	case floorPerSecond > 0: // false for NaN
		b.floor = rate.NewLimiter(rate.Limit(floorPerSecond), 1)
	}

	// Four times as many stripes as processors, a power of two, so that
	// goroutines running in parallel seldom share one.
	n := min(1<<bits.Len(uint(4*max(runtime.GOMAXPROCS(0), 1))-1), budgetMaxStripes)
	b.stripes = make([]budgetStripe, n)
	b.mask = uint32(n - 1)
	return b
}

// newDefaultBudget returns NewBudget(0.1, 1, 20), the budget a Transport
// or a caller (protocol.Caller) makes for itself.
func newDefaultBudget() *Budget {
	return NewBudget(defaultBudgetRatio, defaultBudgetFloor, defaultBudgetCapacity)
}

// budgetClamp returns v within [lo, hi], and ifNaN for NaN.
func budgetClamp(v, lo, hi, ifNaN float64) float64 {
	switch {
	case math.IsNaN(v):
		return ifNaN
	case v < lo:
		return lo
	case v > hi:
		return hi
	}
	return v
}

// budgetFixed converts a clamped number of tokens to millionths of a token.
func budgetFixed(tokens float64) int64 {
	return int64(math.Round(tokens * budgetUnit))
}

// stripe picks the calling goroutine's stripe of counters. It hashes the
// address of a local variable, that is a place on the goroutine's stack, so
// that a goroutine keeps to one stripe (until its stack moves) and different
// goroutines spread over the stripes: a stripe's cache line then stays with
// one processor instead of bouncing between all of them. The address is only
// hashed, never turned back into a pointer.
func (b *Budget) stripe() *budgetStripe {
	if len(b.stripes) == 0 {
		return &b.zero
	}
	var anchor byte
	h := uint64(uintptr(unsafe.Pointer(&anchor))>>10) * 0x9e3779b97f4a7c15 // Fibonacci hashing
	return &b.stripes[uint32(h>>32)&b.mask]
}

// Requested counts one logical request, for Stats only: it does not change
// what the budget allows. It does nothing on a nil Budget.
func (b *Budget) Requested() {
	if b == nil {
		return
	}
	b.stripe().requests.Add(1)
}

// Succeeded records one successful logical request, earning ratio tokens up
// to the capacity. Call it once per logical request that succeeded, not per
// attempt. It does nothing on a nil Budget.
func (b *Budget) Succeeded() {
	if b == nil {
		return
	}
	b.stripe().successes.Add(1)
	if b.ratio == 0 {
		return
	}
	for {
		t := b.tokens.Load()
		if t >= b.capacity {
			return // full: read-only, the common case with healthy traffic
		}
		if b.tokens.CompareAndSwap(t, min(t+b.ratio, b.capacity)) {
			return
		}
	}
}

// AllowRetry reports whether one more retry may be made at time now, and if
// so charges it: one token from the bucket, or else one from the floor. A
// denied retry costs nothing. A nil Budget allows every retry.
func (b *Budget) AllowRetry(now time.Time) bool {
	if b == nil {
		return true
	}
	s := b.stripe()
	// One atomic add instead of a compare-and-swap loop: under contention it
	// never retries. A failed take is given back; meanwhile another caller may
	// see too few tokens and be denied, which can only lower the count.
	if b.tokens.Load() >= budgetUnit {
		if b.tokens.Add(-budgetUnit) >= 0 {
			s.allowed.Add(1)
			return true
		}
		b.giveBack()
	}
	if b.floor != nil && b.floor.AllowN(now, 1) {
		s.allowed.Add(1)
		s.floorAllowed.Add(1)
		return true
	}
	s.denied.Add(1)
	return false
}

// refund gives back the tokens of n retries that led to a success: they
// were worth their cost, so independent failures (a brownout) are retried
// for as long as retries keep working, while retries into a dead
// dependency, which never succeed, stay bounded.
func (b *Budget) refund(n int) {
	if b == nil || len(b.stripes) == 0 {
		return
	}
	b.stripe().refunded.Add(uint64(n))
	for range n {
		b.giveBack()
	}
}

// dependency returns the gate of the budget's dependency, made on first use
// with clk.
func (b *Budget) dependency(clk clock.Clock) *dependency {
	if b == nil {
		return nil
	}
	if d := b.gate.Load(); d != nil {
		return d
	}
	b.gate.CompareAndSwap(nil, newDependency("", clk))
	return b.gate.Load()
}

// DependencyStats returns what the budget's gate knows of its dependency
// (see RideThrough): only Do uses it; the zero value until then.
func (b *Budget) DependencyStats() DependencyStats {
	if b == nil {
		return DependencyStats{}
	}
	if d := b.gate.Load(); d != nil {
		return d.Stats()
	}
	return DependencyStats{State: "up"}
}

// giveBack returns the token of a take that found the bucket short. Tokens
// earned meanwhile were added to a count lowered by that take, so adding it
// back must not lift the bucket above its capacity.
func (b *Budget) giveBack() {
	for {
		t := b.tokens.Load()
		if b.tokens.CompareAndSwap(t, min(t+budgetUnit, b.capacity)) {
			return
		}
	}
}

// BudgetStats is a view of a Budget's state and counters. The counters only
// grow. Taken while calls are in flight, it is not an atomic snapshot: each
// field is exact, but the fields may be a few calls apart.
type BudgetStats struct {
	// Tokens is the number of tokens in the bucket, in [0, Capacity].
	Tokens float64
	// Capacity is the number of tokens the bucket holds when full.
	Capacity float64
	// Requests counts Requested calls.
	Requests uint64
	// Successes counts Succeeded calls.
	Successes uint64
	// RetriesAllowed counts AllowRetry calls that reported true, FloorAllowed
	// included.
	RetriesAllowed uint64
	// FloorAllowed counts the retries allowed by the floor because the bucket
	// held less than one token.
	FloorAllowed uint64
	// RetriesDenied counts AllowRetry calls that reported false.
	RetriesDenied uint64
	// RetriesRefunded counts retries that got their token back: they led
	// to a success, or were never sent (their wait for the dependency
	// ended first).
	RetriesRefunded uint64
}

// Stats returns the budget's state and counters; the zero value for a nil
// Budget.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	// A take in flight may have the count below zero for a moment.
	st := BudgetStats{
		Tokens:   float64(min(max(b.tokens.Load(), 0), b.capacity)) / budgetUnit,
		Capacity: float64(b.capacity) / budgetUnit,
	}
	st.add(&b.zero) // all zeros unless b is the zero Budget
	for i := range b.stripes {
		st.add(&b.stripes[i])
	}
	return st
}

// add adds the counters of one stripe to s.
func (s *BudgetStats) add(c *budgetStripe) {
	s.Requests += c.requests.Load()
	s.Successes += c.successes.Load()
	s.RetriesAllowed += c.allowed.Load()
	s.FloorAllowed += c.floorAllowed.Load()
	s.RetriesDenied += c.denied.Load()
	s.RetriesRefunded += c.refunded.Load()
}

// String formats the statistics on one line, for logs.
func (s BudgetStats) String() string {
	return fmt.Sprintf("tokens=%g/%g requests=%d successes=%d retries allowed=%d (floor %d) denied=%d",
		s.Tokens, s.Capacity, s.Requests, s.Successes, s.RetriesAllowed, s.FloorAllowed, s.RetriesDenied)
}

// mayRetry reports whether a retry asked for at now would be allowed,
// without charging it. A nil Budget allows every retry.
func (b *Budget) mayRetry(now time.Time) bool {
	if b == nil {
		return true
	}
	return b.tokens.Load() >= budgetUnit || (b.floor != nil && b.floor.TokensAt(now) >= 1)
}
