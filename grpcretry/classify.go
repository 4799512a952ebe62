package grpcretry

import (
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// verdictOf classifies one attempt by its status and trailers (see the
// package documentation's table); keyed says the call carries an
// idempotency key, retryable are the codes the call retries
// (RetryableCodes). A nil err is a success.
func verdictOf(err error, trailer metadata.MD, keyed bool, retryable codeSet) protocol.Verdict {
	if err == nil {
		return protocol.Verdict{}
	}
	v := protocol.Verdict{Err: err}
	st, _ := status.FromError(err)
	code := st.Code()
	details := st.Details()
	v.Failing = failing(code)
	// The target answered, whatever it answered (a rejection, our server's
	// "in progress"): it is alive, which its gate learns unless the answer
	// says it is failing. A CANCELED is the caller's own doing.
	v.Answered = code != codes.Canceled
	if len(trailer[ReplayedTrailer]) > 0 {
		// The server's stored outcome of an earlier call with this key:
		// every retry gets it again, and the target that replayed it is
		// up, whatever the stored status says.
		v.Failing = false
		return v
	}
	// An attempt's deadline is always retried (the call's own ends the
	// loop), and a listed code.
	v.Retry = code == codes.DeadlineExceeded || retryable.has(code)
	if code == codes.Aborted && keyed {
		// A concurrency conflict: for a keyed call, the key's first call
		// still running (ours waits it out) or another attempt's lease.
		v.Retry = true
		v.Pending = hasReason(details, ReasonInProgress)
	}
	if len(trailer[PushbackTrailer]) > 0 {
		// The server's own retries gave up: retrying it multiplies load.
		v.Retry, v.Pending, v.Stop, v.Failing = false, false, retry.ErrPushback, true
		return v
	}
	wait, ok, stop := pushbackMs(trailer[PushbackMsTrailer])
	if stop {
		v.Retry, v.Pending, v.Stop = false, false, retry.ErrPushback
		return v
	}
	if d, found := retryDelay(details); found && (!ok || d > wait) {
		wait, ok = d, true
	}
	if ok {
		if code == codes.ResourceExhausted {
			v.Retry = true // a quota that says when to come back
		}
		v.RetryAfter, v.HasRetryAfter = wait, v.Retry
	}
	return v
}

// failing reports whether a status says the server is failing (an HTTP
// 5xx or 429), rather than rejecting the call.
func failing(code codes.Code) bool {
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted,
		codes.Internal, codes.Unknown, codes.DataLoss:
		return true
	}
	return false
}

// pushbackMs reads grpc-retry-pushback-ms: a wait when ok; stop when the
// server said not to retry (a negative, malformed or repeated value, as
// grpc-go reads it).
func pushbackMs(values []string) (wait time.Duration, ok, stop bool) {
	switch len(values) {
	case 0:
		return 0, false, false
	case 1:
	default:
		return 0, false, true
	}
	ms, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil || ms < 0 {
		return 0, false, true
	}
	const maxMs = int64(1<<63-1) / int64(time.Millisecond)
	return time.Duration(min(ms, maxMs)) * time.Millisecond, true, false
}

// retryDelay returns the delay of a google.rpc.RetryInfo among a status's
// details, if any (the first, when there are several).
func retryDelay(details []any) (time.Duration, bool) {
	for _, d := range details {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			delay := ri.GetRetryDelay()
			if delay.CheckValid() != nil || delay.AsDuration() < 0 {
				return 0, false
			}
			return delay.AsDuration(), true
		}
	}
	return 0, false
}

// hasReason reports whether a status's details hold an ErrorInfo of ours
// with reason.
func hasReason(details []any, reason string) bool {
	for _, d := range details {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == ErrorDomain && ei.GetReason() == reason {
			return true
		}
	}
	return false
}
