package sim_test

import (
	"fmt"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest/sim"
)

// A seed on a MemoryStore: its trace lists every event and step, and the
// error is a *sim.Failure when a property broke.
func ExampleRunSeed() {
	clk := sim.NewClock()
	h := sim.Harness{Store: idempotency.NewMemoryStore(clk), Now: clk.Now, Advance: clk.Add}
	trace, err := sim.RunSeed(h, 1, 60)
	fmt.Println(err, trace[0])
	// Output: <nil> broker: 1 deliveries at most
}
