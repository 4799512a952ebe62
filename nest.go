package retry

import "context"

// loopKey marks a context as belonging to a running retry loop.
type loopKey struct{}

// loopContext is a context marked as inside a retry loop. It is a smaller
// allocation than context.WithValue's, on the hot path of every Do.
type loopContext struct{ context.Context }

// Value answers the loop marker and defers every other key to the parent.
func (c loopContext) Value(key any) any {
	if _, ok := key.(loopKey); ok {
		return loopKey{}
	}
	return c.Context.Value(key)
}

// inLoop reports whether ctx comes from inside a retry loop of this package.
// A loop found there makes a single attempt, so loops in one process never
// multiply their attempts.
func inLoop(ctx context.Context) bool {
	return ctx.Value(loopKey{}) != nil
}

// markLoop returns ctx marked as inside a retry loop.
func markLoop(ctx context.Context) context.Context {
	if inLoop(ctx) {
		return ctx
	}
	return &loopContext{ctx}
}
