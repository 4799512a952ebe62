package idempotency_test

import (
	"testing"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		mock := clock.NewMock()
		return storetest.Harness{Store: idempotency.NewMemoryStore(mock), Advance: mock.Add}
	})
}

// The fault matrix on MemoryStore: the faults that apply to a store in the
// process's memory (a worker killed or paused past its lease, at every
// point).
func TestMemoryStoreFaults(t *testing.T) {
	t.Parallel()
	storetest.RunFaults(t, func(t *testing.T) (storetest.Harness, storetest.Faults) {
		mock := clock.NewMock()
		return storetest.Harness{Store: idempotency.NewMemoryStore(mock), Advance: mock.Add}, storetest.Faults{}
	})
}
