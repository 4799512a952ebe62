package pgstore_test

import (
	"testing"

	"github.com/exactlyonce/retry/idempotency/storetest"
)

func TestLister(t *testing.T) {
	t.Parallel()
	storetest.RunLister(t, func(t *testing.T) storetest.Harness {
		s, _, shift := newStore(t)
		return storetest.Harness{Store: s, Advance: shift.Advance}
	})
}
