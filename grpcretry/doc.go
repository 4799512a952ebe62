// Package grpcretry brings exactlyonce to gRPC: client interceptors that
// retry only what is safe, at one layer, within a budget and a deadline,
// on the same loop as the HTTP Transport and retry.Do (retry.Caller), and a
// server interceptor on idempotency.Runner that runs each keyed call once
// and replays its outcome to every repeat. It is a module of its own, so
// gRPC never reaches users of the HTTP half.
//
// # Wiring
//
//	retrying := grpcretry.NewClient(retry.WithTotalTimeout(5 * time.Second))
//	conn, err := grpc.NewClient(addr, creds, grpc.WithChainUnaryInterceptor(retrying.Unary), grpc.WithChainStreamInterceptor(retrying.Stream))
//	server := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary, grpcretry.NewServerInterceptor(runner, callerOf).Unary))
//
// # The client
//
// The options are retry's own, with the same defaults as the Transport:
// 4 attempts, full-jitter backoff from 100 ms, the total deadline of the
// call's context or retry.WithTotalTimeout, attempt timeouts
// (retry.WithAttemptTimeout, retry.WithAdaptiveTimeout learning each
// target's latency; without any deadline, retry.DefaultAttemptTimeout
// bounds each attempt), a retry budget on by default, riding through
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
// The caller's call options apply to every attempt, but for grpc.OnFinish,
// which is about the call: its callbacks run once, when the call is over
// (a server stream's, when the stream that answered ends), with the error
// the call returns. grpc.Header, grpc.Trailer and grpc.Peer get the last
// attempt's (a hedged call's, the winning copy's).
//
// Each attempt's status decides:
//
//	status                     retried?
//	OK                         no: success
//	UNAVAILABLE                yes
//	DEADLINE_EXCEEDED          yes, of an attempt; the call's own deadline ends the call
//	RESOURCE_EXHAUSTED         only with grpc-retry-pushback-ms or a google.rpc.RetryInfo
//	ABORTED                    only for a keyed call; our server's "in progress" is waited out,
//	                           neither spending the budget nor counting as an attempt
//	anything else              no: final (INTERNAL, UNKNOWN and DATA_LOSS count as failures of
//	                           the target, for riding through outages; the others, rejections, do not)
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
//     that provably never left the client.
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
// PushbackUnary and PushbackStream are retry.PushbackMiddleware for gRPC: a
// service whose outgoing calls gave up answers with PushbackTrailer and
// grpc-retry-pushback-ms: -1, which stop our client's retries and grpc-go's
// built-in ones one layer up.
package grpcretry
