package retry

import "context"

// loopKey marks a context as belonging to a running retry loop.
type loopKey struct{}

// inLoop reports whether ctx comes from inside a retry loop of this package.
// A loop found there makes a single attempt, so loops in one process never
// multiply their attempts.
func inLoop(ctx context.Context) bool {
	return ctx.Value(loopKey{}) != nil
}

// markLoop returns ctx marked as inside a retry loop.
func markLoop(ctx context.Context) context.Context {
	return context.WithValue(ctx, loopKey{}, loopKey{})
}
