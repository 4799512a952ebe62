package sim_test

import (
	"context"
	"errors"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest/sim"
)

// unfencedComplete completes a record in progress whatever the fence says:
// the missing fencing on complete.
type unfencedComplete struct{ *idempotency.MemoryStore }

func (s unfencedComplete) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	err := s.MemoryStore.Complete(ctx, f, response)
	if !errors.Is(err, idempotency.ErrLeaseLost) {
		return err
	}
	r, gerr := s.Get(ctx, f.Caller, f.Key)
	if gerr != nil || r.State != idempotency.StateInProgress {
		return err
	}
	return s.MemoryStore.Complete(ctx, r.Fence(), response)
}

// staleReplay answers a claim of a completed record with an outcome of
// its own: a replay that is not the stored outcome.
type staleReplay struct{ *idempotency.MemoryStore }

func (s staleReplay) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	c, err := s.MemoryStore.Claim(ctx, req)
	if err == nil && c.Outcome == idempotency.ClaimCompleted {
		c.Record.Response = []byte("stale")
	}
	return c, err
}

// unstartedClaim drops the started mark a claim asks for: the broker's
// last delivery is not owned by the store from its claim on.
type unstartedClaim struct{ *idempotency.MemoryStore }

func (s unstartedClaim) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	req.Point = ""
	return s.MemoryStore.Claim(ctx, req)
}

// TestMutantsAreCaught checks that the simulation has teeth: a store
// that breaks the protocol in a way a past or plausible bug would fails
// within a few hundred seeds.
func TestMutantsAreCaught(t *testing.T) {
	for name, wrap := range map[string]func(*idempotency.MemoryStore) idempotency.Store{
		"no fencing on complete": func(s *idempotency.MemoryStore) idempotency.Store { return unfencedComplete{s} },
		"a stale replay":         func(s *idempotency.MemoryStore) idempotency.Store { return staleReplay{s} },
		"no started mark at the claim": func(s *idempotency.MemoryStore) idempotency.Store {
			return unstartedClaim{s}
		},
	} {
		t.Run(name, func(t *testing.T) {
			clk := sim.NewClock()
			h := sim.Harness{Store: wrap(idempotency.NewMemoryStore(clk)), Now: clk.Now, Advance: clk.Add}
			for seed := int64(1); seed <= 500; seed++ {
				_, err := sim.RunSeed(h, seed, 60)
				var f *sim.Failure
				if errors.As(err, &f) {
					t.Logf("caught by seed %d: %s", seed, f.Violations[0])
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			t.Fatal("no seed of 500 caught the mutant")
		})
	}
}
