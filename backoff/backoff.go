// Package backoff holds the waits between the attempts of a retry loop:
// give one to retry.WithBackoff (the default is FullJitter(100*time.Millisecond,
// 10*time.Second)), or to any other option that takes a Backoff. It uses
// the standard library only.
package backoff

import (
	"math"
	"time"
)

// Backoff computes how long to wait before a retry. Implementations are
// stateless and safe for concurrent use: the wait is a pure function of its
// arguments, so one Backoff can be shared by every loop and Transport.
//
// retry is the number of the retry about to happen (1 before the second
// attempt, 2 before the third, ...); prev is the wait chosen before the
// previous retry (0 before the first); u is a uniform random number in [0, 1).
// The result must not be negative; the loop treats a negative wait as zero.
type Backoff interface {
	Delay(retry int, prev time.Duration, u float64) time.Duration
}

// Func adapts a function to the Backoff interface.
type Func func(retry int, prev time.Duration, u float64) time.Duration

// Delay calls f.
func (f Func) Delay(retry int, prev time.Duration, u float64) time.Duration {
	return f(retry, prev, u)
}

var _ Backoff = Func(nil)

// minBase is the smallest base accepted; smaller or zero bases are raised to it.
const minBase = time.Millisecond

// exponential is base * 2^(retry-1), capped, with overflow clamped to cap at
// any retry number. retry < 1 counts as 1.
func exponential(base, ceiling time.Duration, retry int) time.Duration {
	if retry < 1 {
		retry = 1
	}
	shift := retry - 1
	if shift >= 62 || base > ceiling>>uint(shift) {
		return ceiling
	}
	return base << uint(shift)
}

// clampBaseCap applies the documented clamps: base <= 0 becomes 1 ms; a cap
// below base becomes base.
func clampBaseCap(base, ceiling time.Duration) (time.Duration, time.Duration) {
	if base < minBase {
		base = minBase
	}
	if ceiling < base {
		ceiling = base
	}
	return base, ceiling
}

// scale returns d * u for u in [0, 1), clamping u into that range.
func scale(d time.Duration, u float64) time.Duration {
	if !(u > 0) { // also catches NaN
		return 0
	}
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	return time.Duration(float64(d) * u)
}

type fullJitter struct{ base, ceiling time.Duration }

// FullJitter waits a uniform random time in [0, min(cap, base*2^(retry-1))).
// It is the default: it spreads retries the most and sends the least load.
// base <= 0 is raised to 1 ms; cap < base is raised to base.
func FullJitter(base, ceiling time.Duration) Backoff {
	base, ceiling = clampBaseCap(base, ceiling)
	return fullJitter{base, ceiling}
}

// Delay implements Backoff.
func (b fullJitter) Delay(retry int, _ time.Duration, u float64) time.Duration {
	return scale(exponential(b.base, b.ceiling, retry), u)
}

type equalJitter struct{ base, ceiling time.Duration }

// EqualJitter waits half of min(cap, base*2^(retry-1)) plus a uniform random
// share of the other half: never less than half the exponential value.
// base <= 0 is raised to 1 ms; cap < base is raised to base.
func EqualJitter(base, ceiling time.Duration) Backoff {
	base, ceiling = clampBaseCap(base, ceiling)
	return equalJitter{base, ceiling}
}

// Delay implements Backoff.
func (b equalJitter) Delay(retry int, _ time.Duration, u float64) time.Duration {
	e := exponential(b.base, b.ceiling, retry)
	half := e / 2
	return half + scale(e-half, u)
}

type decorrelatedJitter struct{ base, ceiling time.Duration }

// DecorrelatedJitter waits a uniform random time in [base, 3*prev), capped
// (prev is the previous wait, base before the first retry). Its waits grow
// like exponential ones but depend on the previous wait rather than the
// retry number. base <= 0 is raised to 1 ms; cap < base is raised to base.
func DecorrelatedJitter(base, ceiling time.Duration) Backoff {
	base, ceiling = clampBaseCap(base, ceiling)
	return decorrelatedJitter{base, ceiling}
}

// Delay implements Backoff.
func (b decorrelatedJitter) Delay(_ int, prev time.Duration, u float64) time.Duration {
	if prev < b.base {
		prev = b.base
	}
	hi := b.ceiling
	if prev <= b.ceiling/3 {
		hi = prev * 3
	}
	d := b.base + scale(hi-b.base, u)
	if d > b.ceiling {
		d = b.ceiling
	}
	return d
}

type constant struct{ d time.Duration }

// Constant waits d before every retry (negative d counts as zero).
func Constant(d time.Duration) Backoff {
	if d < 0 {
		d = 0
	}
	return constant{d}
}

// Delay implements Backoff.
func (b constant) Delay(int, time.Duration, float64) time.Duration { return b.d }
