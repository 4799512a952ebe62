package grpcretry

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry/pushback"
)

// PushbackUnary is pushback.Middleware for a gRPC service's unary
// calls (a grpc.UnaryServerInterceptor): it gives each call a context in
// which the retry loops of its outgoing calls (a Client's, a Transport's,
// retry.Do) record that they gave up on a failing dependency; a call that
// then fails with a server-side status (UNAVAILABLE, INTERNAL, UNKNOWN,
// DEADLINE_EXCEEDED, DATA_LOSS, UNIMPLEMENTED) carries PushbackTrailer,
// naming why, and grpc-retry-pushback-ms: -1. Our Client does not retry
// it, nor does grpc-go's built-in retry, so retries stay at one layer
// across services. Put it outermost, and make outgoing calls with the
// handler's context.
func PushbackUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx = pushback.NewContext(ctx)
	resp, err := handler(ctx, req)
	if err != nil {
		pushbackTrailer(ctx, err)
	}
	return resp, err
}

// PushbackStream is PushbackUnary for streams (a
// grpc.StreamServerInterceptor).
func PushbackStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := pushback.NewContext(ss.Context())
	err := handler(srv, &pushbackStream{ServerStream: ss, ctx: ctx})
	if v := pushback.Value(ctx); v != "" && err != nil && !rejection(status.Code(err)) {
		ss.SetTrailer(pushbackMD(v))
	}
	return err
}

// pushbackTrailer sets the pushback trailers of a unary call that failed
// after an outgoing call gave up.
func pushbackTrailer(ctx context.Context, err error) {
	if v := pushback.Value(ctx); v != "" && !rejection(status.Code(err)) {
		_ = grpc.SetTrailer(ctx, pushbackMD(v))
	}
}

func pushbackMD(value string) metadata.MD {
	return metadata.Pairs(PushbackTrailer, value, PushbackMsTrailer, "-1")
}

// pushbackStream is a server stream whose context records give-ups.
type pushbackStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *pushbackStream) Context() context.Context { return s.ctx }
