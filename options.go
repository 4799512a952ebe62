package retry

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/benbjohnson/clock"
)

// Option configures Do, DoValue, NewTransport and NewClient. Options feed an
// unexported configuration, so a Transport is immutable once built.
type Option func(*config)

// Defaults of the policy.
const (
	// DefaultMaxAttempts is the number of attempts in all: 1 + 3 retries.
	DefaultMaxAttempts = 4
	// DefaultMaxRetryAfter is the longest server-requested wait (Retry-After
	// or RetryAfter) the loop will sleep; a longer one hands the failure back
	// at once, since the server is saying "come back later", not "retry now".
	DefaultMaxRetryAfter = 30 * time.Second
)

// config is the immutable policy built from Options.
type config struct {
	maxAttempts    int
	backoff        Backoff
	classifier     Classifier
	classifierSet  bool
	totalTimeout   time.Duration
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	onAttempt      func(Attempt)
	onRetry        func(Attempt)
	clock          clock.Clock
	random         func() float64
	budget         retryBudget
	budgetSet      bool
	logger         *slog.Logger
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
	dependency(clk clock.Clock, ride rideConfig) *dependency
}

var defaultConfig = newConfig(nil)

// newConfig applies opts over the defaults and clamps what is out of range.
func newConfig(opts []Option) config {
	c := config{
		maxAttempts:   DefaultMaxAttempts,
		backoff:       FullJitter(DefaultBackoffBase, DefaultBackoffCap),
		classifier:    DefaultClassifier,
		maxRetryAfter: DefaultMaxRetryAfter,
		clock:         systemClock,
		random:        rand.Float64,
		http:          defaultHTTPConfig(),
		ride:          defaultRideConfig(),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
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

// WithMaxAttempts sets the number of attempts in all, the first included.
// n < 1 is clamped to 1 (a single attempt, no retry).
func WithMaxAttempts(n int) Option {
	if n < 1 {
		n = 1
	}
	return func(c *config) { c.maxAttempts = n }
}

// WithBackoff sets the wait between attempts. A nil Backoff restores the
// default, FullJitter(DefaultBackoffBase, DefaultBackoffCap).
func WithBackoff(b Backoff) Option {
	return func(c *config) {
		if b == nil {
			b = FullJitter(DefaultBackoffBase, DefaultBackoffCap)
		}
		c.backoff = b
	}
}

// WithClassifier sets which operation errors Do retries. A nil Classifier
// restores DefaultClassifier. (The Transport classifies HTTP outcomes by its
// own rules and consults the classifier only for transport errors.)
func WithClassifier(cl Classifier) Option {
	return func(c *config) {
		c.classifierSet = cl != nil
		if cl == nil {
			cl = DefaultClassifier
		}
		c.classifier = cl
	}
}

// WithTotalTimeout bounds all attempts and waits together. The effective
// deadline is the context's or this one, whichever is sooner. d <= 0 means
// no bound beyond the context's.
func WithTotalTimeout(d time.Duration) Option {
	if d < 0 {
		d = 0
	}
	return func(c *config) { c.totalTimeout = d }
}

// WithAttemptTimeout bounds each attempt; it never exceeds the time left
// before the total deadline. d <= 0 means no per-attempt bound.
func WithAttemptTimeout(d time.Duration) Option {
	if d < 0 {
		d = 0
	}
	return func(c *config) { c.attemptTimeout = d }
}

// WithMaxRetryAfter sets the longest server-requested wait that will be
// honoured (default DefaultMaxRetryAfter); a longer one stops the loop with
// ErrRetryAfterTooLong. d <= 0 means no requested wait is ever slept: any
// RetryAfter or Retry-After, zero included, stops the loop.
func WithMaxRetryAfter(d time.Duration) Option {
	if d < 0 {
		d = 0
	}
	return func(c *config) { c.maxRetryAfter = d }
}

// WithOnAttempt calls fn after every attempt, successful or not, before any
// wait. fn runs on the calling goroutine and must not block.
func WithOnAttempt(fn func(Attempt)) Option {
	return func(c *config) { c.onAttempt = fn }
}

// WithOnRetry calls fn before every wait that precedes a retry.
func WithOnRetry(fn func(Attempt)) Option {
	return func(c *config) { c.onRetry = fn }
}

// WithClock sets the clock for waits, timeouts and deadlines (tests use
// clock.NewMock). A nil clock restores the real one.
func WithClock(clk clock.Clock) Option {
	return func(c *config) {
		if clk == nil {
			clk = systemClock
		}
		c.clock = clk
	}
}

// WithRandom sets the source of uniform random numbers in [0, 1) used for
// jitter. It must be safe for concurrent use when the policy is shared. A nil
// source restores math/rand/v2's Float64.
func WithRandom(fn func() float64) Option {
	return func(c *config) {
		if fn == nil {
			fn = rand.Float64
		}
		c.random = fn
	}
}

// WithBudget makes every retry ask b first, and every success earn for it. One
// Budget may be shared by many Transports and Do calls. Do uses a budget only
// when given one; a Transport makes its own DefaultBudget unless given one.
// WithBudget(nil) means no limit.
func WithBudget(b *Budget) Option {
	return func(c *config) {
		c.budgetSet = true
		c.budget = nil
		if b != nil {
			c.budget = b
		}
	}
}

// WithLogger sends a record per retry (Debug) and per give-up (Info) to l.
// The default is silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}
