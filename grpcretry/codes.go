package grpcretry

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// codeSet is a set of status codes, one bit per code.
type codeSet uint32

// defaultCodes are the codes retried when no RetryableCodes says
// otherwise.
const defaultCodes = codeSet(1) << codes.Unavailable

// maxCode is the highest code gRPC defines.
const maxCode = codes.Unauthenticated

func (s codeSet) has(c codes.Code) bool { return c <= maxCode && s&(1<<c) != 0 }

// retryableCodes is the grpc.CallOption made by RetryableCodes.
type retryableCodes struct {
	grpc.EmptyCallOption
	set codeSet
	bad *CodeError // the first code that is never retried, if any
}

// RetryableCodes sets the status codes the Client's interceptors retry, in
// place of the default, UNAVAILABLE: grpc-go's retryPolicy
// retryableStatusCodes. It is a grpc.CallOption: give it to one call, or
// to every call of a connection with grpc.WithDefaultCallOptions; a call's
// own comes after the connection's, and the last one given decides.
//
//	conn, err := grpc.NewClient(addr, creds, grpc.WithDisableRetry(),
//		grpc.WithDefaultCallOptions(grpcretry.RetryableCodes(codes.Unavailable, codes.ResourceExhausted)),
//		grpc.WithChainUnaryInterceptor(retrying.Unary), grpc.WithChainStreamInterceptor(retrying.Stream))
//	reply, err := client.Charge(ctx, req, grpcretry.RetryableCodes(codes.Unavailable, codes.Internal))
//
// A listed code is retried as UNAVAILABLE is, under every other rule of
// the package documentation: only a call declared idempotent or keyed is
// repeated (any other stops with retry.ErrNotIdempotent, whatever the
// code), pushbacks stop retries and are floors of the next wait, a
// replayed outcome (ReplayedTrailer) is final, and the code counts as a
// failure of the target for riding through outages. The rules that are
// not about the list stay: DEADLINE_EXCEEDED, an attempt's deadline, is
// always retried; RESOURCE_EXHAUSTED with a pushback and ABORTED of a
// keyed call are retried even when not listed. An empty list retries no
// code but those.
//
// OK (a success), CANCELED (the caller's own, or a closing connection's)
// and codes gRPC does not define are never retried: a call given one of
// them is not made and fails with a *CodeError.
func RetryableCodes(cs ...codes.Code) grpc.CallOption {
	o := retryableCodes{}
	for _, c := range cs {
		if c == codes.OK || c == codes.Canceled || c > maxCode {
			if o.bad == nil {
				o.bad = &CodeError{Code: c}
			}
			continue
		}
		o.set |= 1 << c
	}
	return o
}

// codesOf returns the codes the call retries: those of its last
// RetryableCodes option, the default without one. A RetryableCodes option
// with a code that is never retried makes it an error.
func codesOf(opts []grpc.CallOption) (codeSet, error) {
	set := defaultCodes
	for _, o := range opts {
		if rc, ok := o.(retryableCodes); ok {
			if rc.bad != nil {
				return 0, rc.bad
			}
			set = rc.set
		}
	}
	return set, nil
}

// CodeError is the error of a call given RetryableCodes with a code that
// is never retried: OK, CANCELED, or a code gRPC does not define. The call
// is not made. Its gRPC status is INVALID_ARGUMENT.
type CodeError struct {
	// Code is the code that is never retried.
	Code codes.Code
}

// Error says which code, and why it is never retried.
func (e *CodeError) Error() string {
	why := "gRPC defines no such code"
	switch e.Code {
	case codes.OK:
		why = "OK is a success"
	case codes.Canceled:
		why = "CANCELED is the caller's own, or a closing connection's"
	}
	return fmt.Sprintf("grpcretry: RetryableCodes: %v is never retried: %s", e.Code, why)
}

// GRPCStatus is INVALID_ARGUMENT, with the error's message.
func (e *CodeError) GRPCStatus() *status.Status {
	return status.New(codes.InvalidArgument, e.Error())
}
