package redisstore_test

import (
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency/storetest/sim"
)

// TestSimulation runs the deterministic simulation of the protocol on the
// store, its leases on the Redis clock moved by a TimeShift.
func TestSimulation(t *testing.T) {
	s, shift := newStore(t)
	sim.Run(t, sim.Harness{
		Store:   s,
		Now:     func() time.Time { return time.Now().Add(shift.Offset()) },
		Advance: shift.Advance,
	}, sim.Options{Seeds: 150})
}
