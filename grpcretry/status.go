package grpcretry

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Waits the server interceptor asks for, as the HTTP Middleware's
// Retry-After does.
const (
	// storeWait follows a failure of the store or of the transaction.
	storeWait = time.Second
	// leaseLostWait follows an attempt whose lease another took over.
	leaseLostWait = time.Second
)

// refusal is a status the interceptor makes itself, with an ErrorInfo of
// ours that says why.
func refusal(code codes.Code, reason, message string) error {
	return refusalWithDelay(code, reason, message, 0)
}

// refusalWithDelay is refusal with a google.rpc.RetryInfo asking for the
// wait d (none when d <= 0).
func refusalWithDelay(code codes.Code, reason, message string, d time.Duration) error {
	return statusOfRefusal(code, reason, message, d).Err()
}

func statusOfRefusal(code codes.Code, reason, message string, d time.Duration) *status.Status {
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Domain: ErrorDomain, Reason: reason}}
	if d > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	}
	st, err := status.New(code, message).WithDetails(details...)
	if err != nil { // cannot happen: registered messages
		return status.New(code, message)
	}
	return st
}

// stored encodes a status the interceptor stores as a call's outcome (a
// panic, an outcome too large).
func stored(code codes.Code, reason, message string) []byte {
	o := outcome{status: statusOfRefusal(code, reason, message, 0).Proto()}
	b, err := o.encode(nil)
	if err != nil { // cannot happen: a status with registered details
		panic(err)
	}
	return b
}

// setPushback asks the client to wait d before its next attempt, in gRPC's
// own trailer (grpc-go's built-in retry reads it too).
func setPushback(ctx context.Context, d time.Duration) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackMsTrailer, strconv.FormatInt(d.Milliseconds(), 10)))
}
