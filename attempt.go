package retry

import (
	"fmt"
	"time"
)

// Attempt describes one finished attempt, for hooks and logs.
type Attempt struct {
	// Number is the attempt's number, from 1.
	Number int
	// Err is the attempt's error; nil when it succeeded or returned an HTTP
	// response (see StatusCode).
	Err error
	// StatusCode is the HTTP status of the attempt's response, or 0.
	StatusCode int
	// Retrying is true when another attempt follows after Delay.
	Retrying bool
	// Delay is the wait before the next attempt, when Retrying.
	Delay time.Duration
	// Reason is why the loop stops (one of the Err* sentinels) when the
	// attempt failed and no retry follows; nil otherwise.
	Reason error
	// Elapsed is the time from the start of the first attempt to the end of this one.
	Elapsed time.Duration
}

// String renders the attempt for logs.
func (a Attempt) String() string {
	what := "ok"
	switch {
	case a.Err != nil:
		what = a.Err.Error()
	case a.StatusCode != 0:
		what = fmt.Sprintf("status %d", a.StatusCode)
	}
	switch {
	case a.Retrying:
		return fmt.Sprintf("attempt %d: %s; retrying in %v", a.Number, what, a.Delay)
	case a.Reason != nil:
		return fmt.Sprintf("attempt %d: %s; stopping: %v", a.Number, what, a.Reason)
	}
	return fmt.Sprintf("attempt %d: %s", a.Number, what)
}
