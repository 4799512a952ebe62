package grpcretry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/protocol"
)

// A gRPC call nested in a retry loop keeps its key on every attempt of the
// loop, whichever entry point runs it (Do, a Caller's call), as the
// Transport's POSTs and nested Caller calls do (see the root package's
// TestNestedKeysHoldThroughEveryEntryPoint): two charges per attempt, the
// same two keys on the retry. Inside a Caller's call the retry used to give
// them new ranks, so new keys, and the service charged again.
func TestNestedCallKeepsItsKeyThroughEveryLoop(t *testing.T) {
	errAfterCalls := errors.New("the operation failed after its calls")
	outer := map[string]func(ctx context.Context, op func(context.Context) error) error{
		"Do": func(ctx context.Context, op func(context.Context) error) error {
			return retry.Do(ctx, op, fast)
		},
		"Caller": func(ctx context.Context, op func(context.Context) error) error {
			_, err := protocol.NewCaller(fast).Run(ctx, &protocol.Call{Target: "orders", Method: "/orders.Orders/Place"},
				func(ctx context.Context, _ int, _ bool) protocol.Verdict {
					if err := op(ctx); err != nil {
						return protocol.Verdict{Err: err, Retry: true}
					}
					return protocol.Verdict{}
				})
			return err
		},
	}
	for name, run := range outer {
		t.Run(name, func(t *testing.T) {
			a := &attempts{}
			p := &payments{}
			client := dial(t, servePayments(t, false, p, a), grpcretry.NewClient(fast))
			n := 0
			err := run(testCtx(t), func(ctx context.Context) error {
				n++
				for range 2 {
					if _, err := client.Charge(ctx, &paymentspb.ChargeRequest{Account: "acct", AmountCents: 500}); err != nil {
						return err
					}
				}
				if n == 1 {
					return errAfterCalls
				}
				return nil
			})
			require.NoError(t, err)
			keys := a.Keys()
			require.Len(t, keys, 4)
			assert.NotEmpty(t, keys[0])
			assert.NotEqual(t, keys[0], keys[1], "two charges in one attempt are two calls")
			assert.Equal(t, keys[:2], keys[2:], "and keep their keys on the retry")
		})
	}
}
