package grpcretry

import (
	"context"
	"errors"
	"sync"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

var (
	errHandlerPanicked  = errors.New("grpcretry: handler panicked")
	errResponseTooLarge = errors.New("grpcretry: outcome too large to store")
	errRejected         = errors.New("grpcretry: handler rejected the call")
)

// exchange is one keyed call through the ServerInterceptor: the handler's
// run, and what it answered.
type exchange struct {
	s       *ServerInterceptor
	method  string
	out     methodInfo // the method's, for the type of a replayed reply
	req     any
	handler grpc.UnaryHandler
	// invoke, when set, calls the handler for a Reconciler (see resumeWork).
	invoke func(ctx context.Context) (any, error)

	stream   *recordingStream
	resp     any
	err      error
	panicked bool
	panicVal any
}

// work is the Work of the call: it runs the handler with a context whose
// server stream records the metadata it sets, and turns what it answered
// into the outcome to store.
func (x *exchange) work(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
	x.stream = &recordingStream{method: x.method}
	x.serve(grpc.NewContextWithServerTransportStream(ctx, x.stream))
	x.stream.close()
	return x.outcome(e)
}

// serve runs the handler, recovering a panic.
func (x *exchange) serve(ctx context.Context) {
	x.panicked = true
	defer func() {
		if x.panicked {
			x.panicVal = recover()
		}
	}()
	if x.invoke != nil {
		x.resp, x.err = x.invoke(ctx)
	} else {
		x.resp, x.err = x.handler(ctx, x.req)
	}
	x.panicked = false
}

// outcome turns what the handler answered into the Work's result: a
// rejection (a client error before execution began) is not stored, a panic
// or an outcome over the limit stores INTERNAL instead, anything else is
// stored.
func (x *exchange) outcome(e *idempotency.Execution) ([]byte, error) {
	header, trailer := x.stream.metadata()
	if x.panicked {
		return nil, idempotency.Abort(stored(codes.Internal, ReasonPanicked,
			"The call failed; it will not be executed again."), errHandlerPanicked)
	}
	o := outcome{header: header, trailer: trailer}
	if x.err != nil {
		st := status.Convert(x.err)
		if rejection(st.Code()) && !e.Started() {
			return nil, idempotency.Reject(errRejected)
		}
		o.status = st.Proto()
	} else {
		msg, ok := x.resp.(proto.Message)
		if !ok {
			return nil, idempotency.Abort(stored(codes.Internal, ReasonStoreFailed,
				"The reply is not a protocol buffer message and cannot be stored."), errors.New("grpcretry: reply is not a proto.Message"))
		}
		reply, err := proto.Marshal(msg)
		if err != nil {
			return nil, idempotency.Abort(stored(codes.Internal, ReasonStoreFailed,
				"The reply cannot be encoded."), err)
		}
		o.status, o.reply, o.hasReply = &spb.Status{}, reply, true
		o.replyType = string(msg.ProtoReflect().Descriptor().FullName())
	}
	b, err := o.encode(nil)
	if err != nil {
		return nil, err
	}
	if len(b) > x.s.maxResponse {
		return nil, idempotency.Abort(stored(codes.Internal, ReasonResponseTooBig,
			"The outcome was too large to store; the call will not be executed again."), errResponseTooLarge)
	}
	return b, nil
}

// rejection reports whether a status rejects the call (an HTTP 4xx) rather
// than tells of its failure (a 5xx): returned before execution began
// (idempotency.MarkStarted), it is not stored.
func rejection(code codes.Code) bool {
	switch code {
	case codes.Canceled, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.ResourceExhausted, codes.FailedPrecondition,
		codes.Aborted, codes.OutOfRange, codes.Unauthenticated:
		return true
	}
	return false
}

// respond answers the call from the result of Runner.Do.
func (x *exchange) respond(ctx context.Context, res idempotency.Result, err error) (any, error) {
	var ip *idempotency.InProgressError
	switch {
	case err == nil && res.Replayed:
		return x.replay(ctx, res.Response, true)
	case err == nil, errors.Is(err, idempotency.ErrRejected):
		// The handler's own answer, as it gave it.
		header, trailer := x.stream.metadata()
		deliverMetadata(ctx, header, trailer)
		if x.err != nil {
			return nil, x.err
		}
		return x.resp, nil
	case errors.Is(err, idempotency.ErrAborted) && res.Response != nil:
		return x.replay(ctx, res.Response, false)
	case errors.As(err, &ip):
		setPushback(ctx, ip.RetryAfter)
		return nil, refusalWithDelay(codes.Aborted, ReasonInProgress,
			"A call with this "+x.s.keyName+" is still being processed; retry later.", ip.RetryAfter)
	case errors.Is(err, idempotency.ErrFingerprintMismatch):
		return nil, refusal(codes.FailedPrecondition, ReasonKeyMismatch,
			"This "+x.s.keyName+" was used with a different call.")
	case errors.Is(err, idempotency.ErrLeaseLost):
		setPushback(ctx, leaseLostWait)
		return nil, refusalWithDelay(codes.Aborted, ReasonLeaseLost,
			"This attempt ran past its lease and another attempt took over; retry to get its outcome.", leaseLostWait)
	case errors.Is(err, idempotency.ErrTxFailed) && storePermanent(err):
		return nil, refusal(codes.Internal, ReasonTxFailed,
			"A statement of this call's transaction failed; it was rolled back and nothing was stored. "+
				"Retrying will fail the same way until the cause is fixed.")
	case errors.Is(err, idempotency.ErrTxFailed):
		setPushback(ctx, storeWait)
		return nil, refusalWithDelay(codes.Unavailable, ReasonTxFailed,
			"A statement of this call's transaction failed; it was rolled back and nothing was stored. "+
				"Retry with the same "+x.s.keyName+".", storeWait)
	case storePermanent(err):
		return nil, refusal(codes.Internal, ReasonStoreFailed, "The idempotency store cannot take this call.")
	default:
		setPushback(ctx, storeWait)
		return nil, refusalWithDelay(codes.Unavailable, ReasonStoreFailed, "The idempotency store is unavailable.", storeWait)
	}
}

// replay answers with a stored outcome; replayed adds ReplayedTrailer.
func (x *exchange) replay(ctx context.Context, b []byte, replayed bool) (any, error) {
	o, err := decodeOutcome(b)
	if err != nil {
		return nil, refusal(codes.Internal, ReasonStoreFailed, "The stored outcome is unreadable.")
	}
	var reply proto.Message
	if o.hasReply {
		if reply = x.newReply(o.replyType); proto.Unmarshal(o.reply, reply) != nil {
			return nil, refusal(codes.Internal, ReasonStoreFailed, "The stored reply is unreadable.")
		}
	}
	if replayed {
		o.trailer = metadata.Join(o.trailer, metadata.Pairs(ReplayedTrailer, "true"))
	}
	deliverMetadata(ctx, o.header, o.trailer)
	if !o.hasReply {
		return nil, status.ErrorProto(o.status)
	}
	return reply, nil
}

// newReply returns an empty reply to decode a stored one into: of the
// stored type when it is registered (protoregistry.GlobalTypes: every
// generated message is, whether or not its service's descriptor is); else
// of the method's output type, when the method's descriptor is registered
// (an outcome stored without its type); else a message that keeps every
// field as unknown, which encodes back to the stored bytes, so that the
// client gets the reply byte for byte whatever its type.
func (x *exchange) newReply(typeName string) proto.Message {
	if typeName != "" {
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName)); err == nil {
			return mt.New().Interface()
		}
	}
	if x.out.desc != nil {
		out := x.out.desc.Output()
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(out.FullName()); err == nil {
			return mt.New().Interface()
		}
		return dynamicpb.NewMessage(out)
	}
	return new(emptypb.Empty)
}

// deliverMetadata sets the header and trailer of the call.
func deliverMetadata(ctx context.Context, header, trailer metadata.MD) {
	if len(header) > 0 {
		_ = grpc.SetHeader(ctx, header)
	}
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(ctx, trailer)
	}
}

// recordingStream is the server stream a handler behind the interceptor
// sees: it keeps the metadata the handler sets, for the outcome, and
// stops taking any once the handler returned.
type recordingStream struct {
	method          string
	mu              sync.Mutex
	header, trailer metadata.MD
	done            bool
}

var _ grpc.ServerTransportStream = (*recordingStream)(nil)

var errStreamDone = status.Error(codes.Internal, "grpcretry: the handler returned; its metadata can no longer be set")

func (r *recordingStream) Method() string { return r.method }

func (r *recordingStream) SetHeader(md metadata.MD) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return errStreamDone
	}
	r.header = metadata.Join(r.header, md)
	return nil
}

// SendHeader records the header: it is sent with the outcome.
func (r *recordingStream) SendHeader(md metadata.MD) error { return r.SetHeader(md) }

func (r *recordingStream) SetTrailer(md metadata.MD) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return errStreamDone
	}
	r.trailer = metadata.Join(r.trailer, md)
	return nil
}

// close ends the handler's use of the stream.
func (r *recordingStream) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
}

// metadata returns what the handler set.
func (r *recordingStream) metadata() (header, trailer metadata.MD) {
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.header, r.trailer
}

// storePermanent reports whether a store's err will recur however often
// the call is repeated (retry.IsPermanent: marked retry.Permanent, as the
// stores mark such failures), but for a cancelled context: the caller may
// just be going away.
func storePermanent(err error) bool {
	return !errors.Is(err, context.Canceled) && retry.IsPermanent(err)
}
