package retry

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A take that found the bucket short gives its token back; successes earned
// in between must not lift the bucket above its capacity.
func TestBudgetGiveBackNeverExceedsTheCapacity(t *testing.T) {
	b := NewBudget(1, 0, 1)
	now := time.Now()
	assert.True(t, b.AllowRetry(now)) // 1 -> 0
	b.tokens.Add(-budgetUnit)         // a concurrent take that will fail: 0 -> -1
	assert.Zero(t, b.Stats().Tokens, "a take in flight never shows as negative tokens")
	b.Succeeded() // -1 -> 0
	b.Succeeded() // 0 -> 1
	b.giveBack()  // the failed take's token
	assert.Equal(t, 1.0, b.Stats().Tokens, "tokens stay within [0, capacity]")
}

func TestBudgetTokensStayWithinBoundsUnderConcurrency(t *testing.T) {
	b := NewBudget(1, 0, 1)
	now := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b.AllowRetry(now)
				b.Succeeded()
			}
		})
	}
	for range 20000 {
		tok := b.Stats().Tokens
		if tok < 0 || tok > 1 {
			t.Errorf("tokens %v outside [0, 1]", tok)
			break
		}
	}
	close(stop)
	wg.Wait()
	assert.LessOrEqual(t, b.tokens.Load(), b.capacity)
	assert.GreaterOrEqual(t, b.tokens.Load(), int64(0))
}

// A huge or infinite multiplier gives the ceiling, not the floor.
func TestAdaptiveTimeoutHugeMultiplierGivesTheCeiling(t *testing.T) {
	e := newLatencyEstimate(0.999, 0.95)
	for range 100 {
		e.Observe(time.Second)
	}
	for _, m := range []float64{1e300, posInf()} {
		var c config
		WithAdaptiveTimeout(AdaptiveTimeout{Multiplier: m, MinSamples: 1}).apply(&c)
		assert.Equal(t, defaultAttemptTimeout, c.adaptive.attemptTimeoutFor(e), "multiplier %v", m)
	}
}

func posInf() float64 {
	var zero float64
	return 1 / zero
}

// The retries that led to a success get their tokens back, up to the
// capacity; retries that led nowhere stay spent.
func TestBudgetRefundsTheRetriesOfASuccess(t *testing.T) {
	b := NewBudget(0, 0, 5)
	now := time.Now()
	for range 3 {
		assert.True(t, b.AllowRetry(now))
	}
	b.refund(2)
	st := b.Stats()
	assert.Equal(t, 4.0, st.Tokens)
	assert.Equal(t, uint64(2), st.RetriesRefunded)
	b.refund(3)
	assert.Equal(t, 5.0, b.Stats().Tokens, "never above the capacity")
}
