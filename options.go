package retry

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry/backoff"
)

// Option configures Do, DoValue, NewTransport, NewClient, and the requests
// made with a context from NewContext. A Transport is immutable once built.
type Option interface {
	apply(*config)
}

// optionFunc makes a func an Option.
type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is the immutable policy built from Options.
type config struct {
	maxAttempts    int
	backoff        backoff.Backoff
	classifier     func(error) bool
	classifierSet  bool
	totalTimeout   time.Duration
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	clock          clock.Clock
	random         func() float64
	budget         retryBudget
	budgetSet      bool
	logger         *slog.Logger
	report         *Report
	http           httpConfig
	adaptive       adaptiveConfig
	ride           rideConfig
	trace          *Trace
}

// retryBudget is the hook point where the loop asks a retry budget before
// every retry and tells it about every logical request and every success.
// A nil budget allows all.
type retryBudget interface {
	AllowRetry(now time.Time) bool
	Succeeded()
	Requested()
	// refund gives back the tokens of n retries that led to a success.
	refund(n int)
	// dependency is the gate of the budget's dependency, for Do.
	dependency(clk clock.Clock) *dependency
	// mayRetry reports whether a retry would be allowed now, without
	// charging it.
	mayRetry(now time.Time) bool
}

var defaultConfig = newConfig(nil)

// newConfig applies opts over the defaults and clamps what is out of range.
func newConfig(opts []Option) config {
	c := config{
		maxAttempts:   defaultMaxAttempts,
		backoff:       backoff.FullJitter(defaultBackoffBase, defaultBackoffCap),
		classifier:    retryUnlessPermanent,
		maxRetryAfter: defaultMaxRetryAfter,
		clock:         systemClock,
		random:        rand.Float64,
		http:          defaultHTTPConfig(),
		ride:          defaultRideConfig(),
	}
	c.applyAll(opts)
	return c
}

// applyAll applies opts in order, skipping nil ones.
func (c *config) applyAll(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
}

// configFor returns the shared default configuration when there are no
// options, so the common call allocates nothing for its policy.
func configFor(opts []Option) *config {
	if len(opts) == 0 {
		return &defaultConfig
	}
	c := newConfig(opts)
	return &c
}

// WithMaxAttempts sets the number of attempts in all, the first included
// (default 4: 1 + 3 retries). n < 1 is clamped to 1: a single attempt.
func WithMaxAttempts(n int) Option {
	if n < 1 {
		n = 1
	}
	return optionFunc(func(c *config) { c.maxAttempts = n })
}

// WithBackoff sets the wait between attempts. A nil Backoff restores the
// default, backoff.FullJitter(100*time.Millisecond, 10*time.Second): waits of at
// most 100, 200 and 400 ms with the default attempts (0.35 s in all on
// average), never above 10 s.
func WithBackoff(b backoff.Backoff) Option {
	return optionFunc(func(c *config) {
		if b == nil {
			b = backoff.FullJitter(defaultBackoffBase, defaultBackoffCap)
		}
		c.backoff = b
	})
}

// WithClassifier sets which errors are retried: retry reports whether a
// failed attempt's error is worth another attempt. It is asked only for
// non-nil errors, after the context and the Permanent and RetryAfter
// markers: a context that has ended stops the loop, Permanent always stops
// and RetryAfter always retries. The defaults differ by caller: Do retries
// every error but those IsPermanent recognises (it runs code its caller
// declared safe to repeat); a Transport retries only what IsTransient
// recognises, and classifies HTTP responses by its own rules. A nil retry
// restores the default.
func WithClassifier(retry func(err error) bool) Option {
	return optionFunc(func(c *config) {
		c.classifierSet = retry != nil
		if retry == nil {
			retry = retryUnlessPermanent
		}
		c.classifier = retry
	})
}

// WithTotalTimeout bounds all attempts and waits together. The effective
// deadline is the context's or this one, whichever is sooner. By default
// there is none beyond the context's (d <= 0 restores that): give every call
// a deadline, one way or the other.
func WithTotalTimeout(d time.Duration) Option {
	d = max(d, 0)
	return optionFunc(func(c *config) { c.totalTimeout = d })
}

// WithAttemptTimeout bounds each attempt; it never exceeds the time left
// before the total deadline. By default (and with d <= 0) there is no
// per-attempt bound, but a Transport bounds an attempt that nothing else
// bounds (no deadline, and a base without a ResponseHeaderTimeout) to 30 s
// for the response's headers, a timer per attempt.
//
// Cutting an attempt off is worth its cost only when another attempt can
// follow: when the request has a deadline and the attempt limit leaves no
// other attempt, the retry budget could not pay for one, the dependency is
// not up (the attempt is its probe, or let go after an outage), or less
// than another d would be left after the cut, the attempt is not cut and
// runs to the deadline, as it would without retries: a server that is slow,
// not dead, then finishes the work instead of throwing it away.
func WithAttemptTimeout(d time.Duration) Option {
	d = max(d, 0)
	return optionFunc(func(c *config) { c.attemptTimeout = d })
}

// WithMaxRetryAfter sets the longest server-requested wait that will be
// honoured (default 30 s); a longer one stops the loop with
// ErrRetryAfterTooLong. d <= 0 means no requested wait is ever slept: any
// RetryAfter or Retry-After, zero included, stops the loop.
func WithMaxRetryAfter(d time.Duration) Option {
	d = max(d, 0)
	return optionFunc(func(c *config) { c.maxRetryAfter = d })
}

// WithClock sets the clock for waits, timeouts and deadlines (tests use
// clock.NewMock). A nil clock restores the real one.
func WithClock(clk clock.Clock) Option {
	return optionFunc(func(c *config) {
		if clk == nil {
			clk = systemClock
		}
		c.clock = clk
	})
}

// WithBudget makes every retry ask b first, and every success earn for it. One
// Budget may be shared by many Transports and Do calls. Do uses a budget only
// when given one; a Transport (or a protocol.Caller) makes its own NewBudget(0.1, 1, 20)
// unless given one: retries held to 10% of successes, 20 tokens to start, 1
// retry per second when empty.
// WithBudget(nil) means no limit.
func WithBudget(b *Budget) Option {
	return optionFunc(func(c *config) {
		c.budgetSet = true
		c.budget = nil
		if b != nil {
			c.budget = b
		}
	})
}

// WithLogger sends a record per retry (Debug) and per give-up (Info) to l.
// The default is silent.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}
