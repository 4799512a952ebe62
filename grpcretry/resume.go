package grpcretry

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/exactlyonce/retry/idempotency"
)

// neverStored are the metadata WithResume refuses to store: credentials.
var neverStored = []string{"authorization", "proxy-authorization", "cookie"}

// WithResume lets a Reconciler (idempotency.StartReconciler) finish a call
// whose execution stalled when its client does not retry: the interceptor
// stores each keyed call with its record (its method, its request message,
// and the incoming metadata named here) until the record completes, and
// registers a Work with the Runner under name that calls the method's
// handler again, as the same caller with the same key, storing the outcome
// a client that comes back then gets. The handlers are those of the
// services registered through Registrar. Only executions that began
// (idempotency.MarkStarted, or a Step) are resumed.
//
// The resumed call has no credentials: authorization and cookie metadata
// are never stored (naming them panics), no interceptor runs, and the
// CallerFunc does not run again: a handler that authorizes from
// credentials reads the caller of a resumed call
// (idempotency.FromContext(ctx).Resumed()) from the Execution.
func WithResume(name string, metadataNames ...string) ServerOption {
	if name == "" {
		panic("grpcretry: WithResume needs a name")
	}
	keep := make([]string, 0, len(metadataNames))
	for _, m := range metadataNames {
		m = lower(m)
		for _, never := range neverStored {
			if m == never {
				panic("grpcretry: WithResume never stores the " + never + " metadata")
			}
		}
		keep = append(keep, m)
	}
	return func(s *ServerInterceptor) { s.resume, s.resumeMD = name, keep }
}

// resumable is a registered method's handler, for a Reconciler.
type resumable struct {
	impl    any
	handler grpc.MethodHandler
}

// Registrar returns a grpc.ServiceRegistrar that registers services with r
// and remembers their unary handlers, so that WithResume's Reconciler can
// call them again:
//
//	paymentspb.RegisterPaymentsServer(dedup.Registrar(server), impl)
func (s *ServerInterceptor) Registrar(r grpc.ServiceRegistrar) grpc.ServiceRegistrar {
	return registrar{s: s, r: r}
}

type registrar struct {
	s *ServerInterceptor
	r grpc.ServiceRegistrar
}

// RegisterService registers the service with the underlying registrar and
// keeps its unary handlers.
func (g registrar) RegisterService(sd *grpc.ServiceDesc, impl any) {
	g.r.RegisterService(sd, impl)
	for _, m := range sd.Methods {
		g.s.handlers.Store("/"+sd.ServiceName+"/"+m.MethodName, resumable{impl: impl, handler: m.Handler})
	}
}

// storedCallVersion is the first byte of a stored call.
const storedCallVersion = 1

var errBadStoredCall = errors.New("grpcretry: malformed stored call")

// encodeCall encodes what calling the method again needs: a version byte,
// the method, the kept metadata (a count, then names and values), each
// string preceded by its length as a uvarint, then the request message.
func encodeCall(ctx context.Context, method string, body []byte, names []string) []byte {
	b := []byte{storedCallVersion}
	b = appendBytes(b, []byte(method))
	var kept metadata.MD
	for _, name := range names {
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
			if kept == nil {
				kept = metadata.MD{}
			}
			kept[name] = v
		}
	}
	b = appendMD(b, kept)
	return append(b, body...)
}

// decodeCall is the inverse of encodeCall.
func decodeCall(b []byte) (method string, md metadata.MD, body []byte, err error) {
	if len(b) == 0 || b[0] != storedCallVersion {
		return "", nil, nil, errBadStoredCall
	}
	rest := b[1:]
	m, ok := cutBytes(&rest)
	if !ok || len(m) == 0 {
		return "", nil, nil, errBadStoredCall
	}
	if md, ok = cutMD(&rest); !ok {
		return "", nil, nil, errBadStoredCall
	}
	return string(m), md, rest, nil
}

// resumeWork is the Work a Reconciler resumes a stored call with: it calls
// the method's handler again with the stored request and metadata, as the
// interceptor would.
func (s *ServerInterceptor) resumeWork(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
	method, md, body, err := decodeCall(e.Input())
	if err != nil {
		return nil, idempotency.Abort(stored(codes.Internal, ReasonStoreFailed,
			"The stored call is unreadable; it will not be executed again."), err)
	}
	v, ok := s.handlers.Load(method)
	if !ok {
		// Registered on another instance, or not through Registrar: left
		// for a retry, or for a Reconciler that has it.
		return nil, fmt.Errorf("grpcretry: no handler of %s registered through Registrar", method)
	}
	h := v.(resumable)
	md = metadata.Join(md, metadata.Pairs(s.keyName, idempotency.FormatKey(e.Key())))
	x := &exchange{s: s, method: method, out: s.methods.info(method)}
	x.invoke = func(ctx context.Context) (any, error) {
		return h.handler(h.impl, ctx, func(req any) error {
			m, ok := req.(proto.Message)
			if !ok {
				return fmt.Errorf("grpcretry: %s takes %T, not a protocol buffer message", method, req)
			}
			return proto.Unmarshal(body, m)
		}, nil)
	}
	out, err := x.work(metadata.NewIncomingContext(ctx, md), e)
	if x.panicked {
		err = errors.Join(err, errHandlerPanicked)
	}
	return out, err
}
