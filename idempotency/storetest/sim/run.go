package sim

import (
	"context"
	"testing"
	"time"
)

// Run simulates opts.Seeds seeds (or -seeds, or only -seed) on h, and
// fails t with the seed and event trace of the first that breaks a
// property. It logs how many seeds ran and how long they took.
func Run(t *testing.T, h Harness, opts Options) {
	t.Helper()
	if opts.Seeds <= 0 {
		opts.Seeds = 100
	}
	if *seedsFlag > 0 {
		opts.Seeds = *seedsFlag
	}
	if *eventsFlag > 0 {
		opts.Events = *eventsFlag
	}
	if opts.Events <= 0 {
		opts.Events = 60
	}
	start := time.Now()
	if *seedFlag != 0 {
		trace, err := RunSeed(h, *seedFlag, opts.Events)
		if err != nil {
			t.Fatalf("%v(replay: go test -run '^%s$' -seed=%d)", err, t.Name(), *seedFlag)
		}
		for _, l := range trace {
			t.Log(l)
		}
		return
	}
	for seed := int64(1); seed <= int64(opts.Seeds); seed++ {
		if _, err := RunSeed(h, seed, opts.Events); err != nil {
			t.Fatalf("%v(replay: go test -run '^%s$' -seed=%d)", err, t.Name(), seed)
		}
	}
	t.Logf("%d seeds of %d events in %v", opts.Seeds, opts.Events, time.Since(start).Round(time.Millisecond))
}

// RunSeed simulates one seed of events events on h and returns its
// trace; the error is a *Failure when a property broke.
func RunSeed(h Harness, seed int64, events int) ([]string, error) {
	return runSeed(h, seed, events, nil)
}

// runSeed is RunSeed, with mutate, if not nil, changing the world first
// (a mutant, for the simulation's own tests).
func runSeed(h Harness, seed int64, events int, mutate func(*world)) ([]string, error) {
	w := newWorld(h, seed)
	if mutate != nil {
		mutate(w)
	}
	for range events {
		w.event()
	}
	w.heal()
	w.finalChecks(context.Background())
	if len(w.violations) > 0 {
		return w.trace, &Failure{Seed: seed, Violations: w.violations, Trace: w.trace}
	}
	return w.trace, nil
}
