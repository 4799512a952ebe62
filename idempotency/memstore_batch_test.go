package idempotency_test

import (
	"testing"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

// The conformance suite on MemoryBatchStore: every case of a Store, and
// those of a BatchStore.
func TestMemoryBatchStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		mock := clock.NewMock()
		return storetest.Harness{Store: idempotency.NewMemoryBatchStore(mock), Advance: mock.Add}
	})
}

// The fault matrix on MemoryBatchStore: the faults of a store in the
// process's memory, with the Runner's claims and completions alone and
// batched.
func TestMemoryBatchStoreFaults(t *testing.T) {
	t.Parallel()
	storetest.RunFaults(t, func(t *testing.T) (storetest.Harness, storetest.Faults) {
		mock := clock.NewMock()
		return storetest.Harness{Store: idempotency.NewMemoryBatchStore(mock), Advance: mock.Add}, storetest.Faults{}
	})
}
