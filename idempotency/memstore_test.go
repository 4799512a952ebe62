package idempotency_test

import (
	"testing"
	"time"

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

// Stalled executions whose leases ran out at the same instant are taken
// over in the order of their keys, every time, so that a simulation
// replays the same (they came in the order of a map).
func TestMemoryStoreTakesOverTiesInKeyOrder(t *testing.T) {
	t.Parallel()
	for range 20 {
		mock := clock.NewMock()
		s := idempotency.NewMemoryStore(mock)
		ctx := t.Context()
		for _, key := range []string{"k3", "k1", "k4", "k2"} {
			_, err := s.Claim(ctx, idempotency.ClaimRequest{
				Caller: "c", Key: key, Fingerprint: "fp", Lease: time.Minute, TTL: time.Hour, Point: "started",
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		mock.Add(2 * time.Minute)
		for _, want := range []string{"k1", "k2", "k3", "k4"} {
			got, err := s.TakeOverStalled(ctx, "", 1, time.Minute)
			if err != nil || len(got) != 1 || got[0].Key != want {
				t.Fatalf("took over %v (%v), want %s", got, err, want)
			}
		}
	}
}
