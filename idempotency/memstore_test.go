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
