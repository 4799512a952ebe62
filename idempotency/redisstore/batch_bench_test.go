package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
)

// BenchmarkBatch claims a batch of 64 new keys and commits their outcomes,
// as the consumer does with a fetch: two script calls per batch.
func BenchmarkBatch(b *testing.B) {
	rdb := newClient(b)
	s, err := redisstore.New(rdb, redisstore.WithPrefix(newPrefix(b, rdb)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	reqs := make([]idempotency.ClaimRequest, 64)
	for n := 0; b.Loop(); n++ {
		for i := range reqs {
			reqs[i] = idempotency.ClaimRequest{Caller: "bench", Key: fmt.Sprintf("%d-%d", n, i), Fingerprint: "fp",
				Lease: time.Minute, TTL: time.Hour}
		}
		claims, err := s.ClaimBatch(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		tx, err := s.BeginBatch(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range claims {
			m, _ := tx.Begin(ctx, c.Record.Fence())
			if err := m.Complete(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		_ = tx.Close(ctx)
	}
	b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "msgs/s")
}
