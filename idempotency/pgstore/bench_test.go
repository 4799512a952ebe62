package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// seq numbers benchmark requests, so keys never repeat across runs.
var seq atomic.Int64

// clients is the number of concurrent clients in the throughput benchmarks.
const clients = 8

// parallel runs body from clients goroutines (as near as GOMAXPROCS allows)
// and reports requests per second and round trips per request.
// Every call to body gets a number never given before in the process.
func parallel(b *testing.B, rt *roundTrips, body func(ctx context.Context, i int64) error) {
	b.Helper()
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	ctx := context.Background()
	before := rt.count()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := body(ctx, seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(rt.count()-before)/float64(b.N), "roundtrips/op")
}

// BenchmarkHandler compares, with 8 concurrent clients on one pool, a bare
// handler doing one INSERT with the same handler run as an idempotent first
// execution (claim, begin, INSERT in the completion transaction,
// complete+commit) and with the replay of a completed key.
func BenchmarkHandler(b *testing.B) {
	_, schema, _ := newStore(b)
	s, rt := newCountingStore(b, schema, clients)
	insert := "INSERT INTO " + table(schema, "local_writes") + " (name) VALUES ($1)"

	b.Run("bare", func(b *testing.B) {
		parallel(b, rt, func(ctx context.Context, i int64) error {
			_, err := s.Pool().Exec(ctx, insert, fmt.Sprint("bare-", i))
			return err
		})
	})
	b.Run("first-execution", func(b *testing.B) {
		parallel(b, rt, func(ctx context.Context, i int64) error {
			key := fmt.Sprint("first-", i)
			c, err := s.Claim(ctx, claimReq(key))
			if err != nil {
				return err
			}
			tx, err := s.Begin(ctx, fenceOf(c.Record))
			if err != nil {
				return err
			}
			if err := localWrite(tx.Context(ctx), schema, key); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			return tx.Complete(ctx, []byte("201 created"))
		})
	})
	b.Run("replay", func(b *testing.B) {
		const keys = 64
		base := seq.Add(keys)
		for i := base; i < base+keys; i++ {
			c, err := s.Claim(context.Background(), claimReq(fmt.Sprint("replay-", i)))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Complete(context.Background(), fenceOf(c.Record), []byte("201 created")); err != nil {
				b.Fatal(err)
			}
		}
		parallel(b, rt, func(ctx context.Context, i int64) error {
			c, err := s.Claim(ctx, claimReq(fmt.Sprint("replay-", base+i%keys)))
			if err == nil && c.Outcome != idempotency.ClaimCompleted {
				err = fmt.Errorf("replay outcome %d", c.Outcome)
			}
			return err
		})
	})
}
