package retry

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// States of a dependency.
const (
	depUp         int32 = iota // requests go
	depDown                    // requests wait; only probes go
	depRecovering              // waiting requests are released, in a window that grows as they succeed
)

// Tuning of the gate (see RideThrough).
const (
	// downAfter is how many attempts in a row must fail for a dependency
	// to be taken as down: with independent failures of 30%, a run this
	// long happens once in 15,000 attempts or so.
	downAfter = 8
	// budgetDownAfter is how many attempts in a row must have failed for a
	// retry the budget denies to take the dependency as down: a budget
	// drained by another host's outage never takes a healthy host down on
	// its first failure.
	budgetDownAfter = 2
	// downAfterFor: downAfter failures in a row take the dependency down
	// when they came one after the other (each attempt sent after the one
	// before had failed), or when the first of them was sent this long
	// before the last failed. Attempts of many requests sent together
	// that fail together, while other requests are answered a moment
	// later, say something of those requests, not of the dependency.
	downAfterFor = 50 * time.Millisecond
	// probeFirst is the wait before the first probe of a dependency that
	// went down; each failed probe doubles it, up to probeMax.
	probeFirst = 100 * time.Millisecond
	probeMax   = time.Second
	// probeEvery is how many requests may join the wait between two
	// probes: however long the probe interval, a dependency that many
	// requests wait for is probed once for every probeEvery that join, so
	// the requests that arrive between its recovery and the probe that
	// sees it are few (and probes stay a tenth of the requests that wait).
	// A request that may wait less than probeMax counts for its share of
	// it: requests that give up within milliseconds gain little from a
	// probe, and do not send one every ten.
	probeEvery = 10
)

// dependency is what a Transport (per host) or a Budget (for Do) knows of
// one dependency's health, and the requests waiting for it to come back.
// While it is up, asking it costs one atomic load. A request waits on its
// own goroutine, on a channel it shares with the requests whose waits end
// in the same slotWidth, and the dependency's one timer releases waiters.
//
// It holds no policy of its own: how long a request may wait, and behind
// how many others, is the request's (see waiter), so no request sets what
// another may do.
type dependency struct {
	clock clock.Clock

	state atomic.Int32
	// failures counts the attempts in a row that failed (since the last
	// one answered); streak counts those of them sent after the last one
	// it counted had failed (lastFail): attempts that were out together
	// and fail together are one failure of the streak, however many.
	failures  atomic.Int32
	streak    atomic.Int32
	lastFail  atomic.Int64 // when the last failure counted in streak came, in nanoseconds since the epoch
	streakAt  atomic.Int64 // when the first of the failures came, likewise
	firstSent atomic.Int64 // when the first of the failures was sent, likewise
	fullAt    atomic.Int64 // when the downAfter-th of the failures came, likewise
	used      atomic.Bool  // asked since its gate set last looked (see gateSet.evictIdle)
	health    healthGauge
	// slowed is set while the window holds requests back because the
	// dependency was overloaded (not after an outage); answeredAt is when
	// an attempt was last answered meanwhile, in nanoseconds since the
	// epoch.
	slowed     atomic.Bool
	answeredAt atomic.Int64

	mu    sync.Mutex
	queue waitQueue // earliest deadline first
	// fresh holds the requests that arrived while the dependency
	// recovered and found the window full: they go before the backlog.
	fresh waitQueue
	// recovery is closed when the dependency answers again after it was
	// down: requests waiting out a backoff then go (see nextRecovery).
	recovery  chan struct{}
	timer     stopper // the next tick; nil when none is due
	timerAt   time.Time
	downSince time.Time
	askedFrom time.Time // when the failures that took it down began
	arrivals  int       // requests that asked to go since askedFrom (the failures among them)
	// askedBefore is the rate at which the first failures that took it down
	// came, per second: what callers asked before they had to wait.
	askedBefore float64
	// servedBefore is the rate at which it answered, per second, just
	// before those failures began (see answerMeter).
	servedBefore float64
	// servedAtFailure is that rate, taken when the failures began, as
	// float64 bits.
	servedAtFailure atomic.Uint64
	answers         answerMeter
	probeGap        time.Duration
	// quickGap is the probe interval in the first probeFirst of an
	// outage (until quickUntil), while callers are taken to ask at the
	// rate they were served at just before they had to wait: one probe
	// for every probeEvery requests at that rate, each by a request that
	// has not probed. Callers in a closed loop ask nothing once they all
	// wait: without it, a burst of failures that ends once some more
	// attempts were made would last for probe intervals that double. Zero
	// when it served nothing just before (it was failing already): the
	// failures' own pace counts retries, and says nothing of a rate to
	// come back to.
	quickGap   time.Duration
	quickUntil time.Time
	// seen counts the outages and the failed probes told so far: requests
	// that joined the wait after the last of them may have arrived after
	// the dependency came back, and go with those that arrive after the
	// recovery, before the backlog.
	seen      uint64
	nextProbe time.Time
	probing   bool // a probe is out
	// joined counts the requests that joined the wait since the last probe
	// went, each by the share of probeMax it may wait (see probeEvery).
	joined  float64
	probeAt time.Time // when the last probe went
	// answerTime is how long the probe that ended the outage took to be
	// answered: a waiter with less time left is not released.
	answerTime time.Duration
	window     float64 // while recovering: how many attempts may be out at once
	inFlight   int     // while recovering: attempts let go that have not told their outcome
	// minWindow is the least the window shrinks to; above ssthresh it
	// grows by one a round rather than doubling. shrunkAt is when it last
	// shrank: an attempt sent before then that comes back slow or fails
	// does not shrink it again (TCP halves once a round). fastest is the
	// least latency answered since the window was set up (zero: none).
	minWindow float64
	ssthresh  float64
	shrunkAt  time.Time
	fastest   time.Duration
	// epoch counts the windows set up: an attempt counts in the window
	// (and its outcome frees its place) only if it was let go in the
	// current one (see waiter.ticket).
	epoch     uint64
	lastAck   time.Time // while recovering: when an attempt last told its outcome
	drainRate float64   // while recovering: the most waiters released per second
	credit    float64   // releases of waiters due
	creditAt  time.Time
	stats     DependencyStats
}

func newDependency(name string, clk clock.Clock) *dependency {
	return &dependency{clock: clk, fresh: waitQueue{fresh: true}, stats: DependencyStats{Name: name}}
}

// waiter is what one request's loop tells its dependency's gate, and what
// the gate notes of the request between its attempts.
type waiter struct {
	deadline   time.Time     // the request's total deadline; zero: none
	maxWait    time.Duration // the request's RideThrough.MaxWait
	maxWaiters int           // the request's RideThrough.MaxWaiters
	probed     bool          // the request was once sent as the probe
	spare      bool          // the request has more than its last attempt left
	retry      bool          // the request has made an attempt before
	waited     bool          // the request waited once (it counts once in Waited)
	bound      time.Time     // without a deadline, the end of its waits: MaxWait from its first
	// ticket is the window (its dependency's epoch) that counts the
	// attempt out now; zero: none.
	ticket uint64
}

// rank is the request's probe rank: a probe goes from the requests that
// have not probed first, then from those that have attempts to spare.
func (w *waiter) rank() uint8 {
	switch {
	case !w.probed:
		return rankFresh
	case w.spare:
		return rankSpare
	}
	return rankLast
}

// admit lets an attempt go, or holds it while the dependency is down, until
// it is released (as a probe, or in the window after a recovery), its
// context ends, or it has waited too long. A dependency down for longer than the
// request's MaxWait does not hold it: it fails at once unless it goes as
// the probe. A nil dependency lets everything go.
func (d *dependency) admit(ctx context.Context, w *waiter) (probe bool, err error) {
	if d == nil || d.state.Load() == depUp {
		return false, nil
	}
	s, probe, err := d.enqueue(w)
	if s == nil {
		return probe, err
	}
	select {
	case _, released := <-s.ch:
		if released {
			return d.woken(s, w), nil
		}
		return false, ErrDependencyDown // its deadline or MaxWait came
	case <-ctx.Done():
		d.abandon(s, ctx.Err())
		if ctx.Err() == context.DeadlineExceeded {
			return false, ErrDependencyDown
		}
		return false, ErrCancelled
	}
}

// enqueue lets the attempt go at once (a nil slot), fails it at once, or
// queues it.
func (d *dependency) enqueue(w *waiter) (*waitSlot, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	state := d.state.Load()
	if state == depUp {
		return nil, false, nil
	}
	d.arrivals++
	switch state {
	case depDown:
		// An arrival goes as the probe that is due unless a waiter of a
		// lower rank can.
		best, waits := d.bestRank()
		if r := w.rank(); !d.probing && !now.Before(d.nextProbe) && (!waits || r < best) && (r == rankFresh || !d.quick(now)) {
			d.probing, d.probeAt, d.joined = true, now, 0
			d.stats.Probes++
			return nil, true, nil
		}
		if now.Sub(d.downSince) >= w.maxWait {
			// Waiting is for outages that end soon: this one has lasted
			// longer than the request would wait.
			d.stats.FailedFast++
			return nil, false, ErrDependencyDown
		}
	case depRecovering:
		if d.inFlight < int(d.window) && d.goesNow(w, now) {
			d.inFlight++
			w.ticket = d.epoch
			return nil, false, nil
		}
	}
	if d.waiting() >= w.maxWaiters {
		d.stats.Rejected++
		return nil, false, ErrDependencyDown
	}
	deadline := w.deadline
	if deadline.IsZero() {
		if w.bound.IsZero() {
			w.bound = now.Add(w.maxWait)
		}
		deadline = w.bound
	}
	var s *waitSlot
	switch {
	case state == depRecovering && !w.retry:
		// Arrived after the recovery and found the window full: it goes
		// as soon as the window has room, before the backlog.
		s = d.fresh.join(slotOf(deadline), w.rank(), d.seen)
	case state == depRecovering: // a retry: backlog (see goesNow)
		s = d.queue.join(slotOf(deadline), w.rank(), d.seen)
	default:
		s = d.queue.join(slotOf(deadline), w.rank(), d.seen)
		if d.joined += min(deadline.Sub(now), probeMax).Seconds() / probeMax.Seconds(); d.joined >= probeEvery && !d.probing {
			d.nextProbe = now // many wait: probe now, not at the interval
		}
	}
	if !w.waited {
		w.waited = true
		d.stats.Waited++
	}
	d.schedule(now)
	return s, false, nil
}

// goesNow reports whether a request that asks while the dependency
// recovers, and finds room in the window, goes at once. A request that did
// not wait goes: it never queues behind the backlog's paced drain. A retry
// (a request that failed before, whose backoff the recovery may have ended)
// is backlog all the same: it goes at once when the drain has a release
// due, which it takes, and otherwise waits its turn in the backlog, so that
// the retries of requests that failed as the dependency went down do not
// push the release past the drain's pace.
func (d *dependency) goesNow(w *waiter, now time.Time) bool {
	if !w.retry {
		return true
	}
	d.refill(now)
	if d.credit < 1 {
		return false
	}
	d.credit--
	return true
}

// woken tells a released waiter whether it was released as the probe;
// one released in the window holds a place in it.
func (d *dependency) woken(s *waitSlot, w *waiter) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.probes > 0 {
		s.probes--
		return true
	}
	if d.state.Load() == depRecovering {
		w.ticket = d.epoch
	}
	return false
}

// abandon takes a waiter whose context ended (with err) out of its slot.
// If its release was already sent, another waiter of the slot takes it; a
// probe nobody takes goes to someone else.
func (d *dependency) abandon(s *waitSlot, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.index >= 0 {
		q := &d.queue
		if s.fresh {
			q = &d.fresh
		}
		q.leave(s)
		if err == context.DeadlineExceeded {
			d.stats.Expired++
		} else {
			d.stats.Abandoned++
		}
		return
	}
	if s.probes > 0 {
		s.probes--
		d.probing = false
		d.schedule(d.clock.Now())
	}
}

// observe learns from an attempt's outcome; probe says the attempt was
// the dependency's probe, sent when it was sent, and ticket the window
// that counts it.
func (d *dependency) observe(o outcome, probe bool, sent time.Time, ticket uint64) {
	if d == nil {
		return
	}
	d.learn(o, sent, ticket)
	switch {
	case o.alive():
		if d.streak.Load() != 0 {
			d.streak.Store(0)
		}
		if d.failures.Load() != 0 {
			d.failures.Store(0)
		}
		if probe || d.state.Load() == depDown {
			d.recovered()
		}
	case o.unhealthy():
		now := d.clock.Now()
		if d.failures.Add(1) == downAfter {
			d.fullAt.Store(now.UnixNano())
		}
		n := d.streak.Load()
		if n == 0 || sent.IsZero() || sent.UnixNano() >= d.lastFail.Load() {
			n = d.streak.Add(1)
			d.lastFail.Store(now.UnixNano())
		}
		switch {
		case probe:
			d.probeFailed()
		case d.state.Load() != depDown && d.failures.Load() >= downAfter &&
			(n >= downAfter || now.UnixNano()-d.firstSent.Load() >= int64(downAfterFor)):
			d.markDown()
		}
	case probe: // it says nothing: the probe goes to someone else
		d.probeFailed()
	}
}

// alive reports whether the attempt says its dependency is alive: it
// answered, whatever it answered (a success; a rejection, as a 4xx; an
// earlier copy still running, as a keyed 409 with Retry-After or our gRPC server's
// IDEMPOTENCY_KEY_IN_PROGRESS), unless the answer says it is failing (a
// 5xx, a 429). Such an answer ends the streak of failures and, as a probe,
// the outage.
func (o outcome) alive() bool {
	return !o.bad && (o.err == nil || o.answered || o.pending)
}

// failing reports whether the dependency's last attempts failed, so that a
// retry the budget denies takes it as down rather than failing; not while
// it is overloaded and still answering: a host that answers, only slowly,
// is not down, and a retry the budget denies then fails.
func (d *dependency) failing() bool {
	return d.failures.Load() >= budgetDownAfter && !d.answering()
}

// markDown takes the dependency as down: requests wait, probes go.
func (d *dependency) markDown() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.Load() == depDown {
		return
	}
	now := d.clock.Now()
	d.state.Store(depDown)
	d.seen++
	d.stats.Outages++
	d.downSince = now
	d.askedFrom, d.arrivals, d.askedBefore = now, 0, 0
	d.servedBefore = math.Float64frombits(d.servedAtFailure.Load())
	if n := d.failures.Load(); n > 0 {
		at := time.Unix(0, d.streakAt.Load())
		if !at.After(now) {
			d.askedFrom, d.arrivals = at, int(n)
		}
		if full := time.Unix(0, d.fullAt.Load()); n >= downAfter && !full.Before(at) && !full.After(now) {
			// The pace of the first downAfter failures is what callers
			// asked before their retries slowed them down.
			d.askedBefore = downAfter / max(full.Sub(at), time.Millisecond).Seconds()
		}
	}
	d.probeGap, d.nextProbe, d.probing = probeFirst, now.Add(probeFirst), false
	d.quickGap, d.quickUntil = 0, now.Add(probeFirst)
	if d.servedBefore > 0 {
		if gap := time.Duration(probeEvery / d.servedBefore * float64(time.Second)); gap < probeFirst {
			d.quickGap, d.nextProbe = gap, now.Add(gap)
		}
	}
	d.schedule(now)
}

// probeDue returns when the next probe is due and the probe rank it goes
// from; false when none can go (one is out, or none waits). A request
// probes again only when no waiter that has not probed is left, and never
// in the first probeFirst of an outage; one with only its last attempt
// left, only when no other can.
func (d *dependency) probeDue() (uint8, time.Time, bool) {
	r, ok := d.bestRank()
	if d.probing || !ok {
		return 0, time.Time{}, false
	}
	at := d.nextProbe
	if r != rankFresh && d.quickGap > 0 && at.Before(d.quickUntil) {
		at = d.quickUntil
	}
	return r, at, true
}

// bestRank is the lowest probe rank of the waiters, false if none waits:
// those that arrived while the dependency last recovered wait for it as
// much as the backlog, and may probe.
func (d *dependency) bestRank() (uint8, bool) {
	r, ok := d.queue.bestRank()
	if f, fok := d.fresh.bestRank(); fok && (!ok || f < r) {
		return f, true
	}
	return r, ok
}

// quick reports whether the probe due at now may go only from a request
// that has not probed: in the first probeFirst of an outage, at quickGap.
func (d *dependency) quick(now time.Time) bool {
	return d.quickGap > 0 && now.Before(d.quickUntil)
}

// probeFailed schedules the next probe, later than the last.
func (d *dependency) probeFailed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	d.probing = false
	d.seen++
	if d.quick(now) {
		d.nextProbe = now.Add(min(d.quickGap, d.quickUntil.Sub(now)))
	} else {
		d.probeGap = min(2*d.probeGap, probeMax)
		d.nextProbe = now.Add(d.probeGap)
	}
	d.schedule(now)
}

// probeLost frees the probe of an attempt that never told its outcome (its
// code panicked): the next probe goes when it is due.
func (d *dependency) probeLost() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.probing = false
	d.schedule(d.clock.Now())
}

// unjudged frees what an attempt held of the gate when its outcome says
// nothing of the dependency: its request's own deadline or cancellation cut
// it. A probe goes to someone else, as soon as it is due, and the probe
// interval does not grow.
func (d *dependency) unjudged(probe bool, ticket uint64) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	if probe {
		d.probing = false
	} else if d.state.Load() == depRecovering {
		d.acked(now, 0, ticket, time.Time{})
	}
	d.schedule(now)
}

// nextRecovery returns a channel closed when the dependency next answers
// again after it was down; nil (never closed) for a nil dependency or no
// wait.
func (d *dependency) nextRecovery(wait time.Duration) <-chan struct{} {
	if d == nil || wait <= 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.recovery == nil {
		d.recovery = make(chan struct{})
	}
	return d.recovery
}

// recovered starts releasing the waiting requests, and ends the backoff
// waits of requests between two attempts.
func (d *dependency) recovered() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.recovery != nil && d.state.Load() == depDown {
		close(d.recovery)
		d.recovery = nil
	}
	probing := d.probing
	d.probing = false
	if d.state.Load() != depDown {
		return
	}
	now := d.clock.Now()
	d.answerTime = 0
	if probing {
		d.answerTime = now.Sub(d.probeAt)
	}
	// Requests that joined the wait after the last failure it told of
	// may have arrived after it came back: they go first (those with time
	// enough for an answer), and the backlog's drain waits for as many
	// releases.
	moved := d.queue.moveSeen(d.seen, d.releasableFrom(now), &d.fresh)
	d.startRelease(now)
	d.credit -= float64(moved)
	d.state.Store(depRecovering)
	d.release(now)
	d.schedule(now)
}

// tick is the dependency's timer: it expires waiters, sends the probe,
// releases waiters after a recovery, and sets itself again.
func (d *dependency) tick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = nil
	now := d.clock.Now()
	d.expire(now)
	switch d.state.Load() {
	case depDown:
		d.releaseProbe(now)
	case depRecovering:
		d.forgetLost(now)
		d.release(now)
	}
	d.schedule(now)
}

// expire ends the waits that reached their deadline or MaxWait.
func (d *dependency) expire(now time.Time) {
	for _, q := range [...]*waitQueue{&d.queue, &d.fresh} {
		for s := q.first(); s != nil && !slotEnd(s.key.end).After(now); s = q.first() {
			d.stats.Expired += uint64(q.expire(s))
		}
	}
}

// waiting is the number of requests waiting.
func (d *dependency) waiting() int { return d.queue.Len() + d.fresh.Len() }

// releaseProbe sends a waiter with the latest deadline among those that
// have not probed yet, when a probe is due: the probe is the request that
// can wait longest for its answer, so a slow host that answers gets the
// time to do so.
func (d *dependency) releaseProbe(now time.Time) {
	r, at, ok := d.probeDue()
	if !ok || now.Before(at) {
		return
	}
	q, slot := &d.queue, d.queue.latest(r)
	if f := d.fresh.latest(r); slot == nil || (f != nil && f.key.end > slot.key.end) {
		q, slot = &d.fresh, f
	}
	q.release(slot, true)
	d.probing, d.probeAt, d.joined = true, now, 0
	d.stats.Probes++
}

// idle reports whether the dependency holds nothing worth keeping: it is
// up and nobody waits for it.
func (d *dependency) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state.Load() == depUp && d.waiting() == 0 && d.timer == nil
}
