package pgstore

import (
	"context"
	"time"
)

// every runs step at once, then again interval after each run (at once when
// step reports more work waiting), until ctx ends; it returns ctx.Err().
func every(ctx context.Context, interval time.Duration, step func(context.Context) (more bool)) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if step(ctx) {
			t.Reset(0)
		} else {
			t.Reset(interval)
		}
	}
}
