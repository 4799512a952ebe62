package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// batchLimit measures the store's own limit for the consumer's batched
// durable work, without a broker or a consumer: batches of benchInFlight
// keys claimed in one ClaimBatch and completed in one Commit, one batch at
// a time, benchMessages keys in all. It returns keys per second.
func batchLimit(b *testing.B, bs idempotency.BatchStore, run int) float64 {
	b.Helper()
	ctx := context.Background()
	reqs := make([]idempotency.ClaimRequest, benchInFlight)
	start := time.Now()
	for done := 0; done < benchMessages; done += benchInFlight {
		for i := range reqs {
			reqs[i] = idempotency.ClaimRequest{Caller: "limit", Key: fmt.Sprintf("%d-%d", run, done+i), Fingerprint: "fp",
				Lease: time.Minute, TTL: time.Hour}
		}
		claims, err := bs.ClaimBatch(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		tx, err := bs.BeginBatch(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range claims {
			m, err := tx.Begin(ctx, c.Record.Fence())
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Complete(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		res, err := tx.Commit(ctx)
		if err != nil || len(res) != len(claims) {
			b.Fatal(err, len(res))
		}
		_ = tx.Close(ctx)
	}
	return benchMessages / time.Since(start).Seconds()
}
