package retry

import "time"

// Defaults of the policy, of the Transport and of its own budget. Each
// option's doc comment states the default it changes.
const (
	// defaultMaxAttempts is the number of attempts in all: 1 + 3 retries.
	defaultMaxAttempts = 4
	// defaultBackoffBase and defaultBackoffCap shape the default
	// FullJitter backoff: waits of at most 100, 200 and 400 ms with the
	// default attempts (0.35 s in all on average), never above 10 s.
	defaultBackoffBase = 100 * time.Millisecond
	defaultBackoffCap  = 10 * time.Second
	// defaultMaxRetryAfter is the longest server-requested wait (Retry-After
	// or RetryAfter) the loop will sleep; a longer one hands the failure back
	// at once, since the server is saying "come back later", not "retry now".
	defaultMaxRetryAfter = 30 * time.Second
	// defaultAttemptTimeout bounds the wait for a response when nothing else
	// does (no deadline, no WithAttemptTimeout or WithAdaptiveTimeout, and a
	// base that is not an *http.Transport with a ResponseHeaderTimeout): no
	// attempt of a Transport is ever unbounded. It covers the wait for the
	// response's headers, not the reading of its body, and it is a timer per
	// attempt. An attempt it cuts off ends in an *AttemptTimeoutError, like
	// any other attempt timeout of the Transport.
	defaultAttemptTimeout = 30 * time.Second
	// defaultBodyBufferLimit is the largest request body without GetBody that
	// the Transport buffers (while sending it) to replay it on a retry. A
	// larger body is sent once and not retried: memory per request stays
	// bounded. Bodies with GetBody (all bytes, strings and bytes.Buffer
	// bodies given to http.NewRequest) are replayed at any size.
	defaultBodyBufferLimit = 1 << 20
	// defaultBudgetRatio is the tokens a Transport's own budget earns per success:
	// retries are held to 10% of successful traffic (the SRE book's
	// per-client figure).
	defaultBudgetRatio = 0.1
	// defaultBudgetFloor is the number of retries per second a Transport's own budget
	// allows when it is empty.
	defaultBudgetFloor = 1.0
	// defaultBudgetCapacity is the number of tokens a Transport's own budget holds,
	// and starts with.
	defaultBudgetCapacity = 20.0
	// defaultMaxWait is the longest a request without a deadline waits for
	// its dependency to come back, or for an earlier copy of it to finish;
	// and how long a dependency may have been down for requests still to
	// wait for it rather than fail at once (see WithRideThrough).
	defaultMaxWait = 10 * time.Second
	// defaultMaxWaiters is the most requests that wait for one dependency;
	// beyond it a request fails at once with ErrDependencyDown.
	defaultMaxWaiters = 10_000
)

// defaultKeyHeader is the header that carries the idempotency key, unless
// WithKeyHeader names another.
const defaultKeyHeader = "Idempotency-Key"
