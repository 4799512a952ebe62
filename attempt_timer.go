package retry

import (
	"sync"
	"sync/atomic"
	"time"
)

// cutTimer is a timer that cuts an attemptCtx, from a pool: a timer that
// was stopped before it fired goes back to the pool and serves another
// attempt, so timing an attempt allocates nothing. One that fired, or
// whose Stop lost the race with its firing, is left to the collector: its
// func may be running.
type cutTimer struct {
	t      *time.Timer
	target atomic.Pointer[attemptCtx]
}

// cutTimers are the stopped cutTimers, ready for another attempt.
var cutTimers = sync.Pool{New: func() any {
	ct := new(cutTimer)
	ct.t = time.AfterFunc(time.Hour, ct.fire)
	ct.t.Stop()
	return ct
}}

// cutAfter cuts c after d with a timer of package time's. Inside a
// testing/synctest bubble, whose timers must not leave it and where timers
// from outside do not follow its clock, the timer is a new one, never
// pooled.
func cutAfter(c *attemptCtx, d time.Duration) stopper {
	if inBubble() {
		return time.AfterFunc(d, c.cancel)
	}
	ct := cutTimers.Get().(*cutTimer)
	ct.target.Store(c)
	ct.t.Reset(d)
	return ct
}

// fire ends the attempt's context.
func (ct *cutTimer) fire() {
	if c := ct.target.Load(); c != nil {
		c.cancel()
	}
}

// Stop stops the timer and reports whether it stopped it before it fired;
// the timer then goes back to the pool, and must not be used again.
func (ct *cutTimer) Stop() bool {
	if !ct.t.Stop() {
		return false
	}
	ct.target.Store(nil)
	cutTimers.Put(ct)
	return true
}

// inBubble reports whether the goroutine runs in a testing/synctest bubble:
// only there does time.Now have no monotonic reading (the runtime leaves it
// out on purpose, see time_runtimeNow in runtime/time.go).
func inBubble() bool {
	now := time.Now()
	return now == now.Round(0)
}
