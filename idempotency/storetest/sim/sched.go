package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// wait takes a's next signal: where it waits now, or that its operation
// ended.
func (w *world) wait(a *actor) {
	var s signal
	select {
	case s = <-a.out:
	case <-time.After(stuckAfter):
		panic(fmt.Sprintf("sim: seed %d: %s reached no step within %v; trace:\n%s", w.seed, a.name, stuckAfter, strings.Join(w.trace, "\n")))
	}
	if !s.done {
		a.at = s.at
		w.logf("%s @ %s", a.name, s.at)
		return
	}
	a.busy, a.at = false, ""
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
	if d := a.delivery; d != nil {
		a.delivery = nil
		if !d.done {
			if !a.crashed.Load() {
				w.violate("%s's Run returned with %s#%d unsettled", a.name, d.m.key, d.n)
			}
			w.broker.lost(d)
		}
	}
	w.logf("%s: done", a.name)
}

// canStart reports whether a, idle, has an operation to start.
func (w *world) canStart(a *actor) bool {
	return a.kind != reader || w.broker.next() != nil
}

// move lets a take its next step: resume it at its gate, or start its
// next operation.
func (w *world) move(a *actor) {
	if a.busy {
		w.logf("move %s", a.name)
		a.in <- true
		w.wait(a)
		return
	}
	a.busy, a.stopping = true, false
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), actorKey{}, a))
	a.cancel = cancel
	switch a.kind {
	case worker:
		key := httpKeys[w.rng.IntN(len(httpKeys))]
		atClaim := w.rng.IntN(2) == 0
		w.logf("move %s: request %s (started at claim: %v)", a.name, key, atClaim)
		go func() {
			res, err := a.runner.Do(ctx, idempotency.Request{
				Caller: w.caller, Key: key, Fingerprint: "fp", Work: workName, Input: []byte(key), StartedAtClaim: atClaim,
			}, nil)
			if !a.crashed.Load() {
				w.sawResult(a, key, res, err)
			}
			a.finish()
		}()
	case reader:
		w.logf("move %s: run", a.name)
		go func() {
			err := a.consumer.Run(ctx, &source{a: a, end: cancel})
			if !a.crashed.Load() {
				w.logf("  %s: run: %v", a.name, err)
			}
			a.finish()
		}()
	case operator:
		w.logf("move %s: retry a parked execution", a.name)
		go func() {
			key, err := w.parked(ctx, a)
			if err == nil && key != "" {
				var res idempotency.Result
				res, err = a.runner.RetryParked(ctx, w.caller, key)
				if !a.crashed.Load() {
					w.sawResult(a, key, res, err)
				}
			}
			a.finish()
		}()
	case reconciler:
		w.logf("move %s: reconcile", a.name)
		go func() {
			n, err := a.runner.Reconcile(ctx, idempotency.ReconcilerConfig{
				Batch: 1, MaxAttempts: maxAttempts, Clock: a.clock, Logger: w.logger,
			})
			if !a.crashed.Load() {
				w.logf("  %s: reconciled %d: %v", a.name, n, err)
			}
			a.finish()
		}()
	}
	w.wait(a)
}

// crash kills a where it stands and starts a new process in its place.
func (w *world) crash(i int) {
	a := w.actors[i]
	w.logf("crash %s", a.name)
	a.crashed.Store(true)
	if a.cancel != nil {
		a.cancel()
	}
	a.endGraces()
	if a.busy {
		a.in <- false
		w.wait(a) // its goroutines run to their end, with no effect
	}
	w.actors[i] = w.spawn(a.name, a.kind)
}

// stop stops a consumer's Run gracefully.
func (w *world) stop(a *actor) {
	w.logf("stop %s", a.name)
	a.cancel()
}

// event draws and plays one event.
func (w *world) event() {
	type choice struct {
		weight int
		play   func()
	}
	var choices []choice
	for i, a := range w.actors {
		if a.busy || w.canStart(a) {
			choices = append(choices, choice{12, func() { w.move(a) }})
		}
		if a.busy {
			choices = append(choices, choice{1, func() { w.crash(i) }})
			choices = append(choices, choice{1, func() {
				w.logf("pause %s (until every lease ran out)", a.name)
				w.advance(lease + time.Second)
				if a.delivery != nil {
					w.broker.expire(a.delivery)
				}
			}})
			if a.kind == reader && a.cancel != nil && !a.stopping {
				choices = append(choices, choice{1, func() { a.stopping = true; w.stop(a) }})
			}
		}
		choices = append(choices, choice{1, func() {
			w.logf("lose %s's next reply", a.name)
			a.lose = true
		}})
		choices = append(choices, choice{2, func() {
			w.logf("fail %s's next external call", a.name)
			a.fail = true
		}})
		if w.h.FailWrite != nil {
			choices = append(choices, choice{2, func() {
				w.logf("fail %s's next transaction (a statement after its local write fails, and the work ignores it)", a.name)
				a.failWrite = true
			}})
		}
	}
	choices = append(choices, choice{2, func() {
		d := []time.Duration{time.Second, time.Minute, 10 * time.Minute}[w.rng.IntN(3)]
		w.logf("tick %v", d)
		w.advance(d)
	}})
	total := 0
	for _, c := range choices {
		total += c.weight
	}
	n := w.rng.IntN(total)
	for _, c := range choices {
		if n < c.weight {
			c.play()
			return
		}
		n -= c.weight
	}
}

// heal runs every actor to the end of what it does, with no more faults,
// drains the broker, and lets a Reconciler finish what stalled.
func (w *world) heal() {
	w.logf("-- heal: no more faults")
	for _, a := range w.actors {
		a.lose, a.fail, a.failWrite = false, false, false
	}
	for round := 1; ; round++ {
		if round > 500 {
			w.violate("the actors did not settle within 500 steps without faults (a stuck key or message)")
			return
		}
		if round%25 == 0 {
			w.logf("tick %v", lease+time.Second)
			w.advance(lease + time.Second)
		}
		if a := w.firstBusy(); a != nil {
			w.move(a)
			continue
		}
		if w.broker.next() != nil {
			w.move(w.actor("c1"))
			continue
		}
		if at, ok := w.broker.pending(); ok {
			w.logf("tick to %v", at.Sub(w.now()))
			w.advance(at.Sub(w.now()))
			continue
		}
		break
	}
	r := w.actor("r1")
	for range maxAttempts + 1 {
		w.logf("tick %v", lease+time.Second)
		w.advance(lease + time.Second)
		w.move(r)
		for r.busy {
			w.move(r)
		}
	}
}

func (w *world) firstBusy() *actor {
	for _, a := range w.actors {
		if a.busy {
			return a
		}
	}
	return nil
}

func (w *world) actor(name string) *actor {
	for _, a := range w.actors {
		if a.name == name {
			return a
		}
	}
	panic("sim: no actor " + name)
}

// parked returns the key of the first parked record of the seed's caller,
// "" when there is none.
func (w *world) parked(ctx context.Context, a *actor) (string, error) {
	recs, err := a.runner.Store().ListParked(ctx, w.caller, "", 0)
	if err != nil {
		return "", err
	}
	for _, r := range recs {
		if r.Caller == w.caller {
			return r.Key, nil
		}
	}
	return "", nil
}
