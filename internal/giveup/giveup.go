// Package giveup carries, in the context of one incoming request, why a
// retry loop serving it gave up on a failing dependency. Package retry
// writes it (its loops note their give-ups); package pushback creates it and
// reads it (its middleware, and other protocols' interceptors through
// pushback.NewContext and pushback.Value). Standard library only.
package giveup

import (
	"context"
	"sync/atomic"
)

// Header is the response header by which a service says "my own retries
// gave up; do not retry me" (pushback.Header).
const Header = "Retry-Pushback"

type key struct{}

// Record is the give-up of one incoming request: the first one noted.
type Record struct{ value atomic.Pointer[string] }

// NewContext returns a context that carries a new Record, and the Record.
func NewContext(ctx context.Context) (context.Context, *Record) {
	r := &Record{}
	return context.WithValue(ctx, key{}, r), r
}

// Note records value (why a loop gave up: "exhausted", "budget", ...) in the
// Record ctx carries, unless it holds one already; nothing happens when ctx
// carries none.
func Note(ctx context.Context, value string) {
	if r, _ := ctx.Value(key{}).(*Record); r != nil {
		r.value.CompareAndSwap(nil, &value)
	}
}

// Value returns what the Record holds, or "".
func (r *Record) Value() string {
	if v := r.value.Load(); v != nil {
		return *v
	}
	return ""
}

// Value returns what the Record ctx carries holds, or "" (also when ctx
// carries none).
func Value(ctx context.Context) string {
	if r, _ := ctx.Value(key{}).(*Record); r != nil {
		return r.Value()
	}
	return ""
}
