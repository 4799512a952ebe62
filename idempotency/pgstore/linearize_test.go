package pgstore_test

import (
	"testing"

	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/exactlyonce/retry/idempotency/storetest/linearize"
)

// Concurrent calls on one store, with owners paused past their leases and
// the clock moved, make a linearizable history.
func TestLinearizable(t *testing.T) {
	t.Parallel()
	linearize.Run(t, func(t *testing.T) storetest.Harness {
		s, _, shift := newStore(t)
		return storetest.Harness{Store: s, Advance: shift.Advance}
	})
}
