// Package grpcretry brings exactlyonce to gRPC: client interceptors that
// retry only what is safe, at one layer, within a budget and a deadline,
// on the same loop as the HTTP Transport and retry.Do (a protocol.Caller,
// of package github.com/exactlyonce/retry/protocol), and a server
// interceptor on idempotency.Runner that runs each keyed call once and
// replays its outcome to every repeat. It is a module of its own, so
// gRPC never reaches users of the HTTP half.
//
// # Wiring
//
//	retrying := grpcretry.NewClient(retry.WithTotalTimeout(5 * time.Second))
//	conn, err := grpc.NewClient(addr, creds, grpc.WithDisableRetry(),
//		grpc.WithChainUnaryInterceptor(retrying.Unary), grpc.WithChainStreamInterceptor(retrying.Stream))
//	server := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary, grpcretry.NewServerInterceptor(runner, callerOf).Unary))
//
// Example_wiring runs these three lines.
//
// Dial with grpc.WithDisableRetry: retries then happen at one layer, ours.
// Without it, a retryPolicy in the connection's service config (from DNS,
// from xDS, or grpc.WithDefaultServiceConfig) retries inside each of our
// attempts, and the two layers multiply (4 attempts of ours, each up to
// the policy's maxAttempts of grpc-go's: 16 at a dead server with a policy
// of 4). The Client cannot detect it for you: ClientConn.GetMethodConfig
// shows a policy from DNS or a default service config, but not one of an
// xDS route, and nothing shows an interceptor whether the connection was
// dialled with grpc.WithDisableRetry. grpc.WithDisableRetry keeps grpc-go's
// transparent retries, of attempts that never reached the server's
// application, which are safe and multiply nothing.
//
// # The client
//
// The options are retry's own, with the same defaults as the Transport:
// 4 attempts, full-jitter backoff (the wait before retry n is uniform in
// [0, min(10 s, 100 ms x 2^(n-1))): a multiplier of 2 and a cap of 10 s),
// the total deadline of the call's context or retry.WithTotalTimeout (none
// by default), attempt timeouts (retry.WithAttemptTimeout,
// retry.WithAdaptiveTimeout learning each target's latency; without any
// deadline, 30 s bounds each attempt), a retry budget on by default
// (retry.NewBudget(0.1, 1, 20)), riding through
// outages of each target (a connection's Target), hedging of unary calls
// with retry.WithHedging (the losing copy is cancelled and has ended when
// the call returns: nothing of a call runs after it), one layer (a call inside retry.Do makes one
// attempt; its error is marked for Do to decide as this package would),
// retry.Trace hooks and retry.Report (retry.WithReport, through
// CallPolicy or retry.NewContext). A call that fails returns an error
// whose gRPC status is the last attempt's, unchanged (status.Code,
// status.Convert), and which is also a *retry.Error: errors.Is finds the
// reason (retry.ErrAttemptsExhausted, retry.ErrBudgetDenied, ...).
//
// A service config's retryPolicy, field by field:
//
//	grpc-go retryPolicy      grpcretry
//	maxAttempts              retry.WithMaxAttempts (default 4)
//	initialBackoff           retry/backoff.FullJitter's base (default 100 ms)
//	maxBackoff               retry/backoff.FullJitter's cap (default 10 s)
//	backoffMultiplier        2, fixed (a retry/backoff.Func for any other shape)
//	retryableStatusCodes     RetryableCodes, per call or per connection (default UNAVAILABLE)
//	retryThrottling          the retry budget (retry.WithBudget; on by default)
//
// While a target is down (riding through outages, see retry.RideThrough),
// a call waits for it within its deadline; a call without one (no
// deadline in its context, no retry.WithTotalTimeout) waits up to MaxWait
// (10 s by default, retry.WithRideThrough; retry.WithoutRideThrough turns
// riding through off), and none at all (but as the probe that is
// due) once the target has been down for longer than that. How a call that
// did not succeed ends:
//
//	how it ended                                 status                        errors.Is finds
//	the caller cancelled it (in an attempt,      CANCELED                      context.Canceled
//	  a backoff or a wait at the gate)
//	its deadline passed (in an attempt or        DEADLINE_EXCEEDED             context.DeadlineExceeded
//	  a wait at the gate)                                                      (retry.ErrDependencyDown at the gate)
//	its next wait would end past its deadline    the last attempt's            retry.ErrDeadline, context.DeadlineExceeded
//	a wait at the gate ended by MaxWait; the     the last attempt's,           retry.ErrDependencyDown
//	  target down for longer than MaxWait;         UNAVAILABLE when none
//	  MaxWaiters calls waiting already
//	the budget denied a retry (riding through    the last attempt's            retry.ErrBudgetDenied
//	  off; on, the call waits for the target)
//	its attempts spent                           the last attempt's            retry.ErrAttemptsExhausted
//	a final status                               the last attempt's            retry.ErrPermanent (or ErrPushback, ErrNotIdempotent)
//
// Each attempt's status decides:
//
//	status                     retried?
//	OK                         no: success
//	UNAVAILABLE                yes (the default of RetryableCodes)
//	DEADLINE_EXCEEDED          yes, of an attempt, whatever RetryableCodes say; the call's own
//	                           deadline ends the call
//	RESOURCE_EXHAUSTED         only with grpc-retry-pushback-ms or a google.rpc.RetryInfo, or listed
//	ABORTED                    only for a keyed call, or listed; our server's "in progress" is waited
//	                           out, neither spending the budget nor counting as an attempt
//	anything else              only listed; else final (INTERNAL, UNKNOWN and DATA_LOSS count as
//	                           failures of the target, for riding through outages; the others,
//	                           rejections, do not)
//
// RetryableCodes (a grpc.CallOption; grpc.WithDefaultCallOptions gives it
// to every call of a connection) lists the codes retried in place of
// UNAVAILABLE, as a retryPolicy's retryableStatusCodes does. A listed code
// is retried as UNAVAILABLE is, under every rule below: a call neither
// declared idempotent nor keyed is still never repeated after it, and a
// replayed outcome is still final (a keyed call whose stored outcome is
// INTERNAL gets it once more, then stops). A listed code counts as a
// failure of the target, for riding through outages: list only codes that
// say the server is failing, never a rejection that will come again (our
// server's INVALID_ARGUMENT and FAILED_PRECONDITION for a bad or reused
// key). OK, CANCELED and codes gRPC does not define are refused: the call
// fails with a *CodeError (INVALID_ARGUMENT) and is not made.
//
// For riding through outages, a target that answers is alive, whatever it
// answers: every status but CANCELED (the caller's own) and those that say
// the target is failing (UNAVAILABLE, DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED, INTERNAL, UNKNOWN, DATA_LOSS) ends its streak of
// failures, and, answering the probe, its outage: a rejection, our server's
// "in progress" however often, a replayed outcome whatever its status.
//
// Besides the code:
//
//   - grpc-retry-pushback-ms (gRFC A6) and google.rpc.RetryInfo in the
//     status's details are a floor for the next wait (the longer of the
//     two), capped as Retry-After is (retry.WithMaxRetryAfter), never
//     slept past the deadline: the call ends at once instead, with the
//     server's status (code, message, details) unchanged, and
//     errors.Is finds retry.ErrDeadline and context.DeadlineExceeded in
//     its error;
//   - a negative, malformed or repeated grpc-retry-pushback-ms stops
//     retrying (retry.ErrPushback), as in grpc-go;
//   - PushbackTrailer (our services' own retries gave up) stops retrying
//     (retry.ErrPushback);
//   - ReplayedTrailer (the server's stored outcome) stops retrying: a
//     retry would get the same answer;
//   - a call that is neither declared idempotent nor keyed (keys off) is
//     not retried after a failure that may have reached the server
//     (retry.ErrNotIdempotent). grpc-go retries transparently the calls
//     that provably never left the client;
//   - a keyed call is retried after such a failure only once its target
//     has shown it honours keys: an answer echoed the call's key in its
//     trailer (KeyMetadata; every answer of the server interceptor does)
//     or was a replay. Until then it waits, up to its context's end or
//     10 s, for the answers of the other keyed calls out to the same
//     target, and is retried if one shows the target honours keys (as the
//     HTTP Transport does); otherwise it is handled as a call without a
//     key (retry.ErrNotIdempotent), since a server that ignores the key
//     would act again. One whose connection could not be made is retried.
//
// # Keys
//
// A method whose descriptor declares idempotency_level = NO_SIDE_EFFECTS or
// IDEMPOTENT (descriptor.proto's MethodOptions, found through
// protoregistry.GlobalFiles) is retried as it is. Any other gets an
// idempotency key in its metadata (KeyMetadata), made once per call and the
// same on every attempt, in the HTTP half's form (a Structured Field
// string; retry.WithTokenKeys for a plain token). A key the caller put in
// the outgoing metadata is kept. retry.WithoutKeys sends none;
// retry.WithIdempotent (per call, with CallPolicy) marks a call safe to
// repeat without one; retry.WithoutRetries makes one attempt and sends
// none. Inside retry.Do, the key is made from Do's loop and the method, the
// same on every attempt of Do.
//
// # Streams
//
// A server stream is retried only before its first reply arrives; once a
// reply was handed to the caller, the stream is never opened again (a
// failure ends it with its status), so the caller never sees a reply
// twice. Client streams and bidirectional streams are never replayed:
// they pass through untouched. The server interceptor deduplicates unary
// calls only.
//
// # The server
//
// ServerInterceptor is idempotency.Middleware for gRPC. Its rules, the HTTP
// Middleware's each, in gRPC's terms:
//
//	HTTP Middleware                                   gRPC ServerInterceptor
//	key missing on POST/PATCH: 400                    not declared idempotent, no key: INVALID_ARGUMENT (IDEMPOTENCY_KEY_MISSING)
//	key malformed, too long, two lines: 400           INVALID_ARGUMENT (IDEMPOTENCY_KEY_INVALID)
//	CallerFunc failed: 401                            UNAUTHENTICATED (CALLER_UNKNOWN)
//	GET/HEAD passes through; PUT/DELETE keyed or not  NO_SIDE_EFFECTS passes through; IDEMPOTENT deduplicated when keyed
//	fingerprint: method, path, query, body            idempotency.Fingerprint("POST", full method, "", deterministic proto bytes)
//	same key, other payload: 422                      FAILED_PRECONDITION (IDEMPOTENCY_KEY_MISMATCH)
//	first still running: 409 + Retry-After            ABORTED (IDEMPOTENCY_KEY_IN_PROGRESS) + RetryInfo and grpc-retry-pushback-ms,
//	                                                  as long as calls take here (at least 1 s); our client waits it out
//	completed: stored status, header, body,           the stored reply, status (code, message, details), header and
//	  byte for byte, + Idempotent-Replayed: true        trailer metadata, + ReplayedTrailer: true
//	4xx before MarkStarted: sent, not stored          a client-error status (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
//	  (a corrected retry runs)                          PERMISSION_DENIED, FAILED_PRECONDITION, OUT_OF_RANGE, UNAUTHENTICATED,
//	                                                    RESOURCE_EXHAUSTED, ABORTED, CANCELLED) before MarkStarted: same
//	5xx (and 4xx after MarkStarted): stored           any other status (INTERNAL, UNAVAILABLE, UNKNOWN, ...), and any after MarkStarted: stored
//	tenants: keys scoped by caller                    the same: (caller, key), caller from CallerFunc(ctx)
//	keys live 24 h (WithTTL), then free               the same (the Runner's)
//	lease taken over: the late holder gets 409        ABORTED (IDEMPOTENCY_LEASE_LOST) + 1 s pushback; the late outcome is discarded
//	panic: 500 stored, panic re-raised                INTERNAL (HANDLER_PANICKED) stored, panic re-raised (keep a recovery interceptor outside)
//	response over the limit: 500 stored               INTERNAL (RESPONSE_TOO_LARGE) stored (WithMaxResponseSize)
//	store unavailable: 503 + Retry-After: 1           UNAVAILABLE (IDEMPOTENCY_STORE_FAILED) + 1 s pushback
//	store failure that recurs: 500                    INTERNAL (IDEMPOTENCY_STORE_FAILED)
//	transaction failed: 503 (500 if permanent)        UNAVAILABLE (TRANSACTION_ROLLED_BACK) + 1 s pushback (INTERNAL if permanent), never stored
//	WithResume: the Reconciler serves it again        WithResume + Registrar: the Reconciler calls the handler again
//
// The statuses the interceptor makes itself carry a google.rpc.ErrorInfo
// with domain ErrorDomain and one of the Reason* constants. Inside the
// handler everything of package idempotency works as behind the HTTP
// Middleware: idempotency.MarkStarted, Execution.Step with its downstream
// keys, pgstore.TxFrom (the handler's writes commit with the stored
// outcome), the Runner's Observer (otelretry's RunnerOption).
//
// The stored reply is the handler's reply as proto encodes it, with its
// message type's full name, replayed as a message of that type (found in
// protoregistry.GlobalTypes, where every generated message is registered,
// whether or not its service's descriptor is: a hand-written
// grpc.ServiceDesc replays as a generated service does). A reply of a type
// no registry knows is replayed as its bytes, in a message that keeps them
// as unknown fields (an emptypb.Empty, for the interceptors above this
// one). Either way the client gets the reply byte for byte, but for the
// order of a map field's entries (or of a dynamic message's fields), which
// protobuf's encoding leaves open (two sends of one message may differ
// there too).
//
// # One layer across services
//
// PushbackUnary and PushbackStream are package retry/pushback's Middleware
// for gRPC: a
// service whose outgoing calls gave up answers with PushbackTrailer and
// grpc-retry-pushback-ms: -1, which stop our client's retries and grpc-go's
// built-in ones one layer up.
package grpcretry
