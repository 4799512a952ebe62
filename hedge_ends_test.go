package retry_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// Nothing of a call runs after Run returned: the losing copy of a hedged
// attempt, cancelled, has ended by then, whatever it does once cancelled.
func TestCallerHedgeLoserEndsBeforeRunReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running atomic.Int32
		cl := protocol.NewCaller(retry.WithHedging(retry.Hedging{MinDelay: 10 * time.Millisecond}))
		call := &protocol.Call{Idempotent: true, Hedgeable: true}
		v, err := cl.Run(context.Background(), call, func(ctx context.Context, n int, _ bool) protocol.Verdict {
			running.Add(1)
			defer running.Add(-1)
			if n == 1 {
				<-ctx.Done() // the slow copy: cancelled once the hedge wins
				for range 1000 {
					runtime.Gosched() // still at work on the caller's things
				}
				return protocol.Verdict{Err: ctx.Err(), Retry: true}
			}
			return protocol.Verdict{Result: "hedge"}
		})
		require.NoError(t, err)
		assert.Equal(t, "hedge", v.Result)
		assert.Zero(t, running.Load(), "every copy ended before Run returned")
	})
}
