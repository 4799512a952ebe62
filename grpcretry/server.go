package grpcretry

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/exactlyonce/retry/idempotency"
)

// CallerFunc returns the caller a call belongs to: the authenticated
// principal or tenant that scopes its keys, from the call's context (its
// peer, its credentials' AuthInfo, its incoming metadata). An error gets
// UNAUTHENTICATED and the handler does not run.
type CallerFunc func(ctx context.Context) (string, error)

// SingleTenant is a CallerFunc for a service with one caller: every call
// shares one key space. Use it only when no two clients can see each
// other's keys.
func SingleTenant(context.Context) (string, error) { return "", nil }

// ServerOption configures a ServerInterceptor.
type ServerOption func(*ServerInterceptor)

// WithKeyHeader sets the metadata that carries the key (default
// KeyMetadata); gRPC metadata names are lower case.
func WithKeyHeader(name string) ServerOption {
	return func(s *ServerInterceptor) {
		if name != "" {
			s.keyName = lower(name)
		}
	}
}

// WithOptionalKeys lets calls without a key through to the handler,
// undeduplicated, instead of refusing them with INVALID_ARGUMENT: for a
// service whose clients are not all ours yet.
func WithOptionalKeys() ServerOption {
	return func(s *ServerInterceptor) { s.optional = true }
}

// defaultMaxResponse is the largest outcome stored by default: 1 MiB.
const defaultMaxResponse = 1 << 20

// WithMaxResponseSize sets the largest outcome stored (default 1 MiB, as
// the HTTP Middleware's default), counting everything stored: the
// reply, the status and the metadata. A larger outcome is not sent: an
// INTERNAL status (reason RESPONSE_TOO_LARGE) is stored and sent instead,
// since execution began and must never run twice. Values <= 0 are ignored.
func WithMaxResponseSize(n int) ServerOption {
	return func(s *ServerInterceptor) {
		if n > 0 {
			s.maxResponse = n
		}
	}
}

// ServerInterceptor is the gRPC equal of idempotency.Middleware: its Unary
// interceptor runs the handler of each keyed call at most once per
// (caller, key) with its Runner, and answers every repeat with the stored
// outcome (see the package documentation for what is stored and what each
// case answers). It is safe for concurrent use.
type ServerInterceptor struct {
	runner      *idempotency.Runner
	caller      CallerFunc
	keyName     string
	optional    bool
	maxResponse int
	methods     methods
	// resume names the Work a Reconciler resumes stalled calls with, and
	// resumeMD the incoming metadata stored for it (WithResume).
	resume   string
	resumeMD []string
	handlers sync.Map // full method -> resumable, for the Reconciler
}

// NewServerInterceptor returns the interceptor of a service whose keyed
// calls runner deduplicates; caller (required) scopes their keys. Install
// its Unary method:
//
//	dedup := grpcretry.NewServerInterceptor(runner, callerOf)
//	server := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary, dedup.Unary))
func NewServerInterceptor(runner *idempotency.Runner, caller CallerFunc, opts ...ServerOption) *ServerInterceptor {
	if runner == nil || caller == nil {
		panic("grpcretry: NewServerInterceptor needs a Runner and a CallerFunc")
	}
	s := &ServerInterceptor{runner: runner, caller: caller, keyName: KeyMetadata, maxResponse: defaultMaxResponse}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if s.resume != "" {
		runner.Register(s.resume, s.resumeWork)
	}
	return s
}

// Unary is the server interceptor (a grpc.UnaryServerInterceptor).
//
// A method whose descriptor declares idempotency_level NO_SIDE_EFFECTS
// goes to its handler untouched; one declared IDEMPOTENT is deduplicated
// when its call carries a key, and goes through otherwise; any other must
// carry a key (INVALID_ARGUMENT without one, unless WithOptionalKeys).
// Streams are never deduplicated: this interceptor is for unary calls.
//
// The handler's context is the Work's (see idempotency.Runner.Do): it
// keeps the call's values (metadata, peer, credentials), carries the
// Execution (idempotency.MarkStarted, Execution.Step) and, with a TxStore,
// the transaction, and ends with the key's lease, not with the client's
// deadline or cancellation. Header and trailer metadata it sets
// (grpc.SetHeader, grpc.SendHeader, grpc.SetTrailer) are kept with the
// outcome and sent when it returns: a header cannot be sent ahead of the
// stored outcome.
//
// A panicking handler has an INTERNAL status (reason HANDLER_PANICKED)
// stored, then its panic goes on: put a recovery interceptor outside this
// one (grpc-go lets a panic end the process), and the retry of the
// panicked call gets the stored status.
func (s *ServerInterceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m := s.methods.info(info.FullMethod)
	if m.level == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
		return handler(ctx, req)
	}
	values := metadata.ValueFromIncomingContext(ctx, s.keyName)
	switch {
	case len(values) == 0 && (s.optional || m.level == descriptorpb.MethodOptions_IDEMPOTENT):
		return handler(ctx, req)
	case len(values) == 0:
		return nil, refusal(codes.InvalidArgument, ReasonKeyMissing, "This call needs an "+s.keyName+" metadata value.")
	case len(values) > 1:
		return nil, refusal(codes.InvalidArgument, ReasonKeyInvalid, "Send one "+s.keyName+" metadata value.")
	}
	key, err := idempotency.ParseKey(values[0])
	if err != nil {
		return nil, refusal(codes.InvalidArgument, ReasonKeyInvalid,
			"The "+s.keyName+" must be 1 to 255 visible ASCII characters, optionally in double quotes.")
	}
	// Every answer to a keyed call echoes its key: the client's evidence
	// that this server honours keys, so its retries of a call that may
	// have reached it are safe.
	_ = grpc.SetTrailer(ctx, metadata.Pairs(s.keyName, values[0]))
	caller, err := s.caller(ctx)
	if err != nil {
		return nil, refusal(codes.Unauthenticated, ReasonCallerUnknown, "The caller could not be identified.")
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, refusal(codes.Internal, ReasonStoreFailed, "The request is not a protocol buffer message and cannot be fingerprinted.")
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, refusal(codes.Internal, ReasonStoreFailed, "The request cannot be fingerprinted.")
	}
	x := &exchange{s: s, method: info.FullMethod, out: m, req: req, handler: handler}
	r := idempotency.Request{Caller: caller, Key: key, Fingerprint: Fingerprint(info.FullMethod, body)}
	if s.resume != "" {
		r.Work, r.Input = s.resume, encodeCall(ctx, info.FullMethod, body, s.resumeMD)
	}
	res, err := s.runner.Do(ctx, r, x.work)
	resp, err := x.respond(ctx, res, err)
	if x.panicked {
		panic(x.panicVal)
	}
	return resp, err
}

// Fingerprint returns the fingerprint of a call to fullMethod whose request
// message's deterministic protobuf encoding is body: that of the HTTP/2
// request the call is, idempotency.Fingerprint("POST", fullMethod, "",
// body), so the same algorithm and version serve both protocols.
func Fingerprint(fullMethod string, body []byte) string {
	return idempotency.Fingerprint("POST", fullMethod, "", body)
}

// lower returns s in lower case (ASCII).
func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
