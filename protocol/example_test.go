package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/protocol"
)

// errUnavailable is a failure of the toy protocol worth another attempt.
var errUnavailable = errors.New("unavailable")

// A protocol's client makes each call on a Caller: its attempt function
// makes one attempt and says what came back in a Verdict. Here a server
// that is unavailable twice, then takes the charge; the call is not
// idempotent, so the Caller gives it a key, the same on every attempt.
func ExampleCaller() {
	caller := protocol.NewCaller(retry.WithBackoff(backoff.Constant(time.Millisecond)))

	answers := []error{errUnavailable, errUnavailable, nil} // the server's, one an attempt
	keys := map[string]bool{}
	call := &protocol.Call{Target: "payments.internal:443", Method: "/payments.Payments/Charge"}
	v, err := caller.Run(context.Background(), call, func(ctx context.Context, n int, hedge bool) protocol.Verdict {
		keys[call.Key] = true // the key this attempt sends
		if err := answers[n-1]; err != nil {
			return protocol.Verdict{Err: err, Retry: true, Failing: true}
		}
		return protocol.Verdict{Result: fmt.Sprintf("charged on attempt %d", n)}
	})
	if err != nil {
		fmt.Println("failed:", err)
		return
	}
	fmt.Println(v.Result)
	fmt.Println("keys sent:", len(keys), "non-empty:", call.Key != "")

	// A rejection (as a 4xx) ends the call at once.
	rejected := errors.New("invalid amount")
	_, err = caller.Run(context.Background(), &protocol.Call{Target: "payments.internal:443", Method: "/payments.Payments/Charge"},
		func(context.Context, int, bool) protocol.Verdict {
			return protocol.Verdict{Err: rejected, Answered: true}
		})
	var rerr *retry.Error
	if errors.As(err, &rerr) {
		fmt.Println(rerr.Attempts, "attempt:", errors.Is(err, rejected), errors.Is(err, retry.ErrPermanent))
	}
	// Output:
	// charged on attempt 3
	// keys sent: 1 non-empty: true
	// 1 attempt: true true
}
