package retry_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// errFirstAttempt fails an operation's first attempt after its nested calls.
var errFirstAttempt = errors.New("the operation failed after its nested calls")

// nestedKeys records the keys of the keyed calls an operation makes, by
// call, attempt after attempt.
type nestedKeys struct {
	mu   sync.Mutex
	keys map[string][]string
}

func (k *nestedKeys) add(call, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string][]string{}
	}
	k.keys[call] = append(k.keys[call], key)
}

func (k *nestedKeys) of(call string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys[call]...)
}

// nestedCalls makes the keyed calls of one attempt of an operation: two
// POSTs to the same URL through a Transport, a Caller's call, and a POST
// through the Transport from a Do nested in the attempt.
func nestedCalls(ctx context.Context, client *http.Client, url string, cl *protocol.Caller, keys *nestedKeys) error {
	for range 2 {
		if err := post(ctx, client, url+"/charge"); err != nil {
			return err
		}
	}
	call := &protocol.Call{Target: "payments", Method: "/payments.Payments/Charge"}
	if _, err := cl.Run(ctx, call, func(context.Context, int, bool) protocol.Verdict { return protocol.Verdict{} }); err != nil {
		return err
	}
	keys.add("caller", call.Key)
	return retry.Do(ctx, func(ctx context.Context) error { return post(ctx, client, url+"/inner") })
}

// The keyed calls nested in a retry loop keep their keys on every attempt
// of it, whichever entry point runs the loop (Do, a Caller's call) and
// whichever makes the nested call (a POST through the Transport, another
// Caller's call, a Do nested in the attempt): the service downstream sees
// the same call twice, never two calls. The Caller's loop used to rank its
// nested calls on from the first attempt: "<id>" then "<id>.2".
func TestNestedKeysHoldThroughEveryEntryPoint(t *testing.T) {
	outer := map[string]func(ctx context.Context, op func(context.Context) error) error{
		"Do": func(ctx context.Context, op func(context.Context) error) error {
			return retry.Do(ctx, op, retry.WithClock(newAutoClock()))
		},
		"Caller": func(ctx context.Context, op func(context.Context) error) error {
			cl := protocol.NewCaller(retry.WithClock(newAutoClock()))
			_, err := cl.Run(ctx, &protocol.Call{Target: "orders", Method: "/orders.Orders/Place"},
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
			srv, server := newKeysServer(t)
			client, _ := newClient(t)
			cl := protocol.NewCaller()
			var keys nestedKeys
			attempts := 0
			err := run(t.Context(), func(ctx context.Context) error {
				attempts++
				if err := nestedCalls(ctx, client, srv.URL, cl, &keys); err != nil {
					return err
				}
				if attempts == 1 {
					return errFirstAttempt
				}
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, 2, attempts)
			charges, inner, caller := server.of("/charge"), server.of("/inner"), keys.of("caller")
			require.Len(t, charges, 4)
			require.Len(t, inner, 2)
			require.Len(t, caller, 2)
			assert.Equal(t, charges[:2], charges[2:], "the Transport's POSTs keep their keys")
			assert.NotEqual(t, charges[0], charges[1], "two POSTs in one attempt are two calls")
			assert.Equal(t, caller[0], caller[1], "the Caller's call keeps its key")
			assert.Equal(t, inner[0], inner[1], "the POST of the nested Do keeps its key")
			all := map[string]bool{charges[0]: true, charges[1]: true, caller[0]: true, inner[0]: true}
			assert.Len(t, all, 4, "each call has a key of its own")
		})
	}
}

// A Caller's hedged attempt sends a copy of the call beside the first: the
// keyed calls nested in the copy get the keys of the same calls in the
// first, so the service downstream runs each once.
func TestNestedKeysAreTheSameInBothCopiesOfAHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := protocol.NewCaller()
		var keys nestedKeys
		hedged := make(chan struct{})
		cl := protocol.NewCaller(retry.WithHedging(retry.Hedging{MinDelay: 10 * time.Millisecond}))
		call := &protocol.Call{Target: "orders", Method: "/orders.Orders/Place", Hedgeable: true}
		_, err := cl.Run(t.Context(), call, func(ctx context.Context, n int, _ bool) protocol.Verdict {
			for range 2 {
				nested := &protocol.Call{Target: "payments", Method: "/payments.Payments/Charge"}
				_, err := inner.Run(ctx, nested, func(context.Context, int, bool) protocol.Verdict { return protocol.Verdict{} })
				assert.NoError(t, err)
				keys.add("copy"+string(rune('0'+n)), nested.Key)
			}
			if n == 1 {
				<-hedged // slow: the hedge goes, and wins
				return protocol.Verdict{Err: ctx.Err(), Retry: true}
			}
			close(hedged)
			return protocol.Verdict{}
		})
		require.NoError(t, err)
		first, second := keys.of("copy1"), keys.of("copy2")
		require.Len(t, first, 2)
		require.Len(t, second, 2)
		assert.Equal(t, first, second, "both copies make the same calls")
		assert.NotEqual(t, first[0], first[1])
	})
}
