package redisstore_test

import (
	"testing"

	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		s, shift := newStore(t)
		return storetest.Harness{Store: s, Advance: shift.Advance}
	})
}

// One shard: every record and index in one hash tag.
func TestConformanceOneShard(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		s, shift := newStore(t, redisstore.WithShards(1))
		return storetest.Harness{Store: s, Advance: shift.Advance}
	})
}
