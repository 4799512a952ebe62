package consumer

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// outagePoll is how often a paused consumer looks at its dependencies'
// state.
const outagePoll = 50 * time.Millisecond

// outage is what a Consumer knows of its handler's dependencies: down
// while a Budget of Config.DependsOn or Config.Down says so, or after a
// handler reported it until a handler succeeds.
type outage struct {
	c        *Consumer
	reported atomic.Bool
	wasDown  atomic.Bool

	mu        sync.Mutex
	probes    int
	nextProbe time.Time
}

// down reports whether a dependency is down now, counting and logging the
// start of each outage.
func (o *outage) down() bool {
	d := o.reported.Load() || o.signalled()
	if o.wasDown.CompareAndSwap(!d, d) {
		if d {
			o.c.stats.outages.Add(1)
			o.c.cfg.Logger.Warn("consumer: a dependency is down; fetching paused", slog.String("consumer", o.c.cfg.Name))
		} else {
			o.mu.Lock()
			o.probes, o.nextProbe = 0, time.Time{}
			o.mu.Unlock()
			o.c.cfg.Logger.Info("consumer: dependencies up; fetching resumed", slog.String("consumer", o.c.cfg.Name))
		}
	}
	return d
}

// signalled asks the configured signals. A Budget's dependency that is
// recovering counts as down: its gate is releasing the requests that
// waited, paced, and takes it as up once they are all through, which new
// requests would put off.
func (o *outage) signalled() bool {
	for _, b := range o.c.cfg.DependsOn {
		if st := b.DependencyStats().State; st != "up" && st != "" {
			return true
		}
	}
	return o.c.cfg.Down != nil && o.c.cfg.Down()
}

// report records that a handler met a dependency down (or the store failing).
func (o *outage) report() {
	if !o.reported.Swap(true) {
		o.down()
	}
}

// healthy records that a handler succeeded.
func (o *outage) healthy() {
	if o.reported.Load() && o.reported.Swap(false) {
		o.down()
	}
}

// probeDue reports whether a paused consumer may fetch one message now,
// and if so schedules the next one after a backoff (never sooner than
// outagePoll).
func (o *outage) probeDue() bool {
	now := o.c.cfg.Clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if now.Before(o.nextProbe) {
		return false
	}
	o.probes++
	o.nextProbe = now.Add(max(o.c.cfg.Backoff.Delay(o.probes, 0, rand.Float64()), outagePoll))
	return true
}

// waitTimer is a timer made on first use and reset on each.
type waitTimer struct{ t *clock.Timer }

func (w *waitTimer) reset(clk clock.Clock, d time.Duration) <-chan time.Time {
	if w.t == nil {
		w.t = clk.Timer(d)
	} else {
		w.t.Reset(d)
	}
	return w.t.C
}

func (w *waitTimer) stop() {
	if w.t != nil {
		w.t.Stop()
	}
}
