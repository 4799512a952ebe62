package redisstore_test

import (
	"testing"

	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/exactlyonce/retry/idempotency/storetest/linearize"
)

// Concurrent calls on one store, with owners paused past their leases and
// the clock moved, make a linearizable history: with records spread over
// shards, and with one shard.
func TestLinearizable(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{redisstore.DefaultShards, 1} {
		linearize.Run(t, func(t *testing.T) storetest.Harness {
			s, shift := newStore(t, redisstore.WithShards(shards))
			return storetest.Harness{Store: s, Advance: shift.Advance}
		})
	}
}
