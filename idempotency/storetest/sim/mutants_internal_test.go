package sim

import (
	"errors"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// TestHiddenLastDeliveryIsCaught checks that the simulation catches a
// consumer that gives back the broker's last delivery: an adapter that
// never says a delivery is the last makes the consumer give it back, and
// the broker drops it.
func TestHiddenLastDeliveryIsCaught(t *testing.T) {
	clk := NewClock()
	h := Harness{Store: idempotency.NewMemoryStore(clk), Now: clk.Now, Advance: clk.Add}
	for seed := int64(1); seed <= 500; seed++ {
		_, err := runSeed(h, seed, 60, func(w *world) { w.broker.hideLast = true })
		var f *Failure
		if errors.As(err, &f) {
			t.Logf("caught by seed %d: %s", seed, f.Violations[0])
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("no seed of 500 caught the mutant")
}
