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
