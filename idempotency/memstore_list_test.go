package idempotency_test

import (
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

func TestMemoryStoreLister(t *testing.T) {
	storetest.RunLister(t, func(t *testing.T) storetest.Harness {
		mock := clock.NewMock()
		return storetest.Harness{Store: idempotency.NewMemoryStore(mock), Advance: mock.Add}
	})
}
