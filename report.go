package retry

import (
	"context"
	"fmt"
	"net/http"
)

// Report tells what one Do call or one RoundTrip did. Ask for it with
// WithReport; it is filled in when the call returns.
type Report struct {
	// Attempts is the number of attempts made, hidden replays by the
	// underlying transport included.
	Attempts int
	// Reason is why retrying stopped: nil when the last attempt succeeded,
	// else one of the Err* sentinels (ErrAttemptsExhausted, ErrBudgetDenied, ...).
	Reason error
	// StatusCode is the status of the last HTTP response, or 0.
	StatusCode int
	// Err is the last attempt's error, or nil.
	Err error
	// IdempotencyKey is the key a Transport's attempts carried: the
	// caller's, or the one the Transport made for a POST or PATCH; empty
	// when they carried none (and always for Do). To repeat the request
	// later as the same logical request, send it with this key.
	IdempotencyKey string
}

// String renders the report for logs.
func (r Report) String() string {
	if r.Reason == nil {
		return fmt.Sprintf("%d attempts, succeeded", r.Attempts)
	}
	return fmt.Sprintf("%d attempts, stopped: %v", r.Attempts, r.Reason)
}

// WithReport makes the call fill in *r when it returns: for Do, pass it to
// the call; for a request through a Transport, give it to the request
// with NewContext(ctx, WithReport(&r)). For a response handed back after
// retries, it tells how many attempts were made and why retrying stopped.
// Each round trip (each redirect hop) overwrites it.
//
// A Report belongs to one call at a time: calls that run concurrently must
// each have their own (a Report is a plain struct, written without a lock
// when the call returns); do not give one to a whole Transport. A
// Transport running inside Do leaves the Report to Do.
func WithReport(r *Report) Option {
	return optionFunc(func(c *config) { c.report = r })
}

// fillReport stores the outcome of a loop in the policy's report, if any,
// and returns that report (nil when none was asked for).
func (c *config) fillReport(attempts int, reason error, last outcome) *Report {
	r := c.report
	if r == nil {
		return nil
	}
	*r = Report{Attempts: attempts, Reason: reason, StatusCode: last.status, Err: last.err}
	return r
}

// StatusError is the last error of a loop whose last attempt was an HTTP
// response that could not be handed back (it was drained before a retry that
// then did not happen, for example because the context ended during the
// wait, or a wait for the dependency was in vain and the body could not be
// kept). It keeps what the server said besides the body.
type StatusError struct {
	// StatusCode is the response's status code.
	StatusCode int
	// Header is the response's header (Retry-After, for one): the server's
	// reasons, which outlive its body.
	Header http.Header
}

// Error names the status.
func (e *StatusError) Error() string {
	return fmt.Sprintf("retry: last response was %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// handedBackKey is the context key, on the request of a response handed
// back after the loop stopped, of its Report.
type handedBackKey struct{}

// ReportOf returns the Report of the Transport's round trip that handed
// resp back although it failed (a 503 after the attempts ran out, a 500
// that is not retried, a 429 whose Retry-After was too long), and true:
// why retrying stopped, read from the response itself, with no WithReport
// threaded in. It returns false for a response that succeeded or is a
// final answer (a 404, say), and for one no Transport of this package
// handed back.
func ReportOf(resp *http.Response) (Report, bool) {
	if resp == nil || resp.Request == nil {
		return Report{}, false
	}
	r, ok := resp.Request.Context().Value(handedBackKey{}).(*Report)
	if !ok {
		return Report{}, false
	}
	return *r, true
}

// markHandedBack gives resp the report of the loop that handed it back
// although it failed (see ReportOf): its Request is a copy carrying it.
// Only a failed response handed back pays for it: call it only then.
func markHandedBack(resp *http.Response, r Report) {
	if resp == nil || resp.Request == nil {
		return
	}
	resp.Request = resp.Request.WithContext(context.WithValue(resp.Request.Context(), handedBackKey{}, &r))
}
