package retry_test

import (
	"context"
	"testing"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

//go:noinline
func succeed(context.Context) error { return nil }

// BenchmarkDo compares Do on an operation that succeeds at once with calling
// the operation directly, side by side in one run.
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := succeed(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Do", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := retry.Do(ctx, succeed); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DoValue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := retry.DoValue(ctx, func(context.Context) (int, error) { return 1, nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Do/options", func(b *testing.B) {
		b.ReportAllocs()
		opts := []retry.Option{retry.WithMaxAttempts(3), retry.WithBackoff(backoff.Constant(0))}
		for b.Loop() {
			if err := retry.Do(ctx, succeed, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
