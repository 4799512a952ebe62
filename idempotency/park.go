package idempotency

import "errors"

// ErrParked is matched (errors.Is) by every error made with Park, and so
// by the error Runner.Do returns when a Work parked its execution.
var ErrParked = errors.New("idempotency: the execution was parked")

// Park, returned by a Work, gives up on the execution without an outcome
// and without losing it: the work's transaction (with a TxStore) is rolled
// back and the record is parked (Store.Park) with err's text as its
// reason. A parked record keeps its request (Request.Work and Input) and
// its completed steps; Store.ListParked lists it, a Reconciler never takes
// it over, and Runner.RetryParked (or a repeat's claim) runs it again.
// Use it for a failure that repeating the call will not mend, where the
// work must still be done once its cause is: a message whose handler
// fails for good, a delivery that reached its broker's limit. Runner.Do
// returns the marked error (after the observer, WithObserver, hears OutcomeParked);
// errors.Is(err, ErrParked) is true and errors.Is/As also see err. If the
// record cannot be parked (the store failed), the execution is abandoned
// as for a plain error, and Do returns the store's error (which does not
// match ErrParked, since nothing was parked). Park(nil) is nil.
func Park(err error) error {
	if err == nil {
		return nil
	}
	return &parking{err: err}
}

type parking struct{ err error }

func (p *parking) Error() string   { return "idempotency: parked: " + p.err.Error() }
func (p *parking) Unwrap() []error { return []error{ErrParked, p.err} }
