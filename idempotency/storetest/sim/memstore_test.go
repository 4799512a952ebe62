package sim_test

import (
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest/sim"
)

func memHarness() sim.Harness {
	clk := sim.NewClock()
	return sim.Harness{Store: idempotency.NewMemoryStore(clk), Now: clk.Now, Advance: clk.Add}
}

func TestMemoryStore(t *testing.T) {
	sim.Run(t, memHarness(), sim.Options{Seeds: 2000})
}

// TestReplay checks that a seed replays exactly: the same events, steps
// and outcomes, on a store of its own each time.
func TestReplay(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		first, err1 := sim.RunSeed(memHarness(), seed, 60)
		second, err2 := sim.RunSeed(memHarness(), seed, 60)
		if err1 != nil || err2 != nil {
			t.Fatalf("seed %d: %v %v", seed, err1, err2)
		}
		if len(first) != len(second) {
			t.Fatalf("seed %d: %d trace lines, then %d", seed, len(first), len(second))
		}
		for i := range first {
			if first[i] != second[i] {
				t.Fatalf("seed %d differs at line %d: %q, then %q", seed, i, first[i], second[i])
			}
		}
	}
}
