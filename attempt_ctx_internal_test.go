package retry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

// An attemptCtx behaves as context.WithCancel's context would: values and
// deadline from its parent, Done and Err once cancelled, and its
// cancellation reaches the contexts derived from it (as net/http derives
// one) and context.AfterFunc's funcs, without a goroutine of theirs.
func TestAttemptCtxIsACancellableContext(t *testing.T) {
	var c attemptCtx
	c.init(context.WithValue(context.Background(), ctxKey{}, "v"))
	assert.Equal(t, "v", c.Value(ctxKey{}))
	_, ok := c.Deadline()
	assert.False(t, ok)
	assert.NoError(t, c.Err())

	child, cancelChild := context.WithCancelCause(&c)
	defer cancelChild(nil)
	sibling, cancelSibling := context.WithCancel(&c)
	cancelSibling() // its stop leaves a registration that does nothing once it has ended
	called := make(chan struct{})
	stop := context.AfterFunc(&c, func() { close(called) })
	stopped := false
	context.AfterFunc(&c, func() { stopped = true })() // stopped at once: never runs
	select {
	case <-c.Done():
		t.Fatal("done before it was cancelled")
	default:
	}

	c.cancel()
	<-c.Done()
	assert.ErrorIs(t, c.Err(), context.Canceled)
	<-child.Done()
	assert.ErrorIs(t, context.Cause(child), context.Canceled)
	assert.ErrorIs(t, sibling.Err(), context.Canceled)
	<-called
	assert.False(t, stop(), "the func has run")
	assert.False(t, stopped)
	c.cancel() // a second time does nothing

	late, cancelLate := context.WithCancel(&c)
	defer cancelLate()
	<-late.Done() // derived from an ended context: ends at once
}

// An attemptCtx cancelled before anyone asked for its Done channel hands
// out one that is closed.
func TestAttemptCtxCancelledBeforeDone(t *testing.T) {
	var c attemptCtx
	c.init(context.Background())
	c.cancel()
	<-c.Done()
	assert.ErrorIs(t, c.Err(), context.Canceled)
}

// A pooled timer cuts its attempt when it fires, and one stopped in time
// never does; one that fired is not reused.
func TestCutTimerCutsOrStops(t *testing.T) {
	var a, b attemptCtx
	a.init(context.Background())
	b.init(context.Background())
	ta := cutAfter(&a, time.Millisecond)
	tb := cutAfter(&b, time.Hour)
	<-a.Done() // fired
	assert.False(t, ta.Stop())
	require.True(t, tb.Stop())
	assert.NoError(t, b.Err(), "a timer stopped in time does not cut its attempt")
}

// Timers of a testing/synctest bubble never go to the pool, nor come from
// it: the same process times attempts inside a bubble and outside it after.
func TestCutTimersStayInTheirBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		require.True(t, inBubble())
		var c attemptCtx
		c.init(context.Background())
		start := time.Now()
		cutAfter(&c, defaultAttemptTimeout)
		<-c.Done()
		assert.Equal(t, defaultAttemptTimeout, time.Since(start), "the bubble's clock cuts it")
		var d attemptCtx
		d.init(context.Background())
		assert.True(t, cutAfter(&d, time.Hour).Stop())
	})
	require.False(t, inBubble())
	var c attemptCtx
	c.init(context.Background())
	assert.True(t, cutAfter(&c, time.Hour).Stop(), "a timer from the pool, made outside the bubble")
	assert.True(t, cutAfter(&c, time.Hour).Stop())
}
