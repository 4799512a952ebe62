// Package protocolcore defines, once, the types that package retry's loop
// and package github.com/exactlyonce/retry/protocol share: a Call and the
// Verdict of its attempts. Package protocol names them through aliases
// (protocol.Call, protocol.Verdict), so that a Call handed to a Caller is
// the very value the loop reads and writes, never a copy (a copy would
// race: an attempt reads the Key the loop sets). Their documentation for
// users is package protocol's.
//
// The root builds a Caller, which needs its own configuration, through
// NewCaller, which it sets in an init function: this package cannot import
// the root, which imports it. Standard library only.
package protocolcore

import (
	"context"
	"time"
)

// Call describes one logical call to a Caller's Run (protocol.Call, with
// O the root's Option).
type Call[O any] struct {
	// Target names the dependency: calls with the same Target share its
	// gate (see retry.RideThrough) and its latency estimate.
	Target string
	// Method names the operation. With Target it is the call's identity:
	// inside another retry loop, the call's key is made from the loop and
	// the identity, so it stays the same on every attempt of the loop.
	Method string
	// Idempotent: the call is safe to repeat as it is, and needs no key.
	Idempotent bool
	// Key is the call's idempotency key. Set it to keep a key of the
	// caller's own; left empty, Run makes one before the first attempt when
	// the call needs it (not Idempotent, keys not turned off with
	// retry.WithoutKeys, retry.WithIdempotent or retry.WithoutRetries), in
	// the form the Options say (retry.WithTokenKeys), and sets it here. A
	// call that is neither Idempotent nor keyed is not retried after a
	// failure worth retrying: repeating it could repeat its effect, so Run
	// stops with retry.ErrNotIdempotent.
	Key string
	// Hedgeable: an attempt may be made twice at once (see retry.Hedging):
	// the attempt function keeps each copy's result to itself when told it
	// is hedged. Only idempotent or keyed calls are hedged.
	Hedgeable bool
	// Hold: the successful attempt's context must outlive Run (a stream
	// read after it): Run leaves it, and the total deadline's, to Release.
	// Held calls are never hedged.
	Hold bool
	// Options are the call's own options, applied after the Caller's and
	// those of retry.NewContext.
	Options []O

	// held are the contexts Run left to Release; only the loop sets them,
	// through SetHeld.
	held [2]context.CancelFunc
}

// Release ends the contexts that Run left to a Hold call that succeeded
// (its attempt's and its total deadline's): call it once the call is over
// (its stream ended). It does nothing for other calls, and nothing the
// second time.
func (call *Call[O]) Release() {
	for i, cancel := range call.held {
		if cancel != nil {
			call.held[i] = nil
			cancel()
		}
	}
}

// SetHeld leaves to call's Release the contexts that Run ends otherwise
// (the successful attempt's and the total deadline's). Only the loop calls
// it.
func SetHeld[O any](call *Call[O], attempt, loop context.CancelFunc) {
	call.held = [2]context.CancelFunc{attempt, loop}
}

// Verdict is what one attempt of a Call tells the Caller
// (protocol.Verdict). The zero Verdict is a success.
type Verdict struct {
	// Err is the attempt's failure; nil for a success.
	Err error
	// Retry: the failure is transient, another attempt may succeed.
	Retry bool
	// Failing: the attempt says its dependency is failing (as a 5xx or a
	// 429 does), even when it is not retried; a rejection of the call (as
	// a 4xx) is not. A retried failure always counts as failing.
	Failing bool
	// Answered: the dependency answered the attempt, whatever it answered
	// (a rejection of the call, as a 4xx; an earlier copy still running,
	// Pending): it is alive, so the attempt ends its streak of failures and,
	// as a probe, its outage (see retry.RideThrough). A success always is
	// an answer, and a Failing verdict counts against its dependency
	// whatever this says; an attempt that got no answer (cancelled on the
	// caller's side, say) leaves it false and tells the gate nothing.
	Answered bool
	// Pending: the server says an earlier copy of the call, with the same
	// key, is still running. The next attempt waits for its outcome, which
	// is neither a retry the budget pays for nor one the attempt limit
	// counts (see retry.RideThrough).
	Pending bool
	// RetryAfter, when HasRetryAfter, is the server's requested wait: a
	// floor for the next one. One over retry.WithMaxRetryAfter, or ending
	// past the deadline, stops the loop (retry.ErrRetryAfterTooLong,
	// retry.ErrDeadline).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Stop, when not nil, ends the loop now with this reason
	// (retry.ErrPushback, for one).
	Stop error
	// Result is the protocol's own: Run hands back the Verdict of the
	// attempt that ended the loop (a hedge's winning copy) with it.
	Result any
}

// NewCaller returns a new Caller of the root's, with the policy of opts (a
// []retry.Option), as package protocol's Caller holds it: a value with the
// methods of protocol.Caller. The root sets it in an init function.
var NewCaller func(opts any) any
