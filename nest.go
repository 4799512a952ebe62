package retry

import (
	"context"
	"sync/atomic"
)

// loopKey marks a context as belonging to a running retry loop.
type loopKey struct{}

// loopContext is a context marked as inside a retry loop. It is a smaller
// allocation than context.WithValue's, on the hot path of every Do, and it
// carries the loop's stable idempotency keys.
type loopContext struct {
	context.Context
	keys atomic.Pointer[loopKeys] // made on first use
}

// nextKey returns the key of the next keyed request in the current attempt.
func (c *loopContext) nextKey() string {
	k := c.keys.Load()
	if k == nil {
		c.keys.CompareAndSwap(nil, &loopKeys{})
		k = c.keys.Load()
	}
	return k.next()
}

// newAttempt starts a new attempt of the loop.
func (c *loopContext) newAttempt() {
	if k := c.keys.Load(); k != nil {
		k.newAttempt()
	}
}

// Value answers the loop marker and defers every other key to the parent.
func (c *loopContext) Value(key any) any {
	if _, ok := key.(loopKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// loopOf returns the loop that ctx runs inside, or nil.
func loopOf(ctx context.Context) *loopContext {
	lc, _ := ctx.Value(loopKey{}).(*loopContext)
	return lc
}

// inLoop reports whether ctx comes from inside a retry loop of this package.
// A loop found there makes a single attempt, so loops in one process never
// multiply their attempts.
func inLoop(ctx context.Context) bool {
	return loopOf(ctx) != nil
}

// markLoop returns ctx marked as inside a new retry loop.
func markLoop(ctx context.Context) *loopContext {
	return &loopContext{Context: ctx}
}
