package idempotency

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// periodic runs a pass every interval on a goroutine of its own, until
// stop: what a Sweeper and a Reconciler share.
type periodic struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startPeriodic starts calling pass every interval of clk, the first one
// interval after the start. The ticker exists before it returns, so a mock
// clock moved right after the start fires it.
func startPeriodic(clk clock.Clock, interval time.Duration, pass func(ctx context.Context)) *periodic {
	ctx, cancel := context.WithCancel(context.Background())
	p := &periodic{cancel: cancel, done: make(chan struct{})}
	ticker := clk.Ticker(interval)
	go func() {
		defer close(p.done)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				pass(ctx)
			}
		}
	}()
	return p
}

// stop cancels the pass in progress, if any, and waits for the goroutine
// to end. Safe to call more than once.
func (p *periodic) stop() {
	p.once.Do(p.cancel)
	<-p.done
}
