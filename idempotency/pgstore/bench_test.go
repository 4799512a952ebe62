package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5/pgconn"
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

// BenchmarkHTTP compares, with 8 concurrent clients over loopback HTTP and
// one pool of 8 connections, a bare handler doing one INSERT with the same
// handler behind the idempotency middleware (its INSERT in the completion
// transaction), first executions and replays.
func BenchmarkHTTP(b *testing.B) {
	_, schema, _ := newStore(b)
	s, rt := newCountingStore(b, schema, clients)
	insert := "INSERT INTO " + table(schema, "local_writes") + " (name) VALUES ($1)"
	handler := func(db func(ctx context.Context) (execer, bool)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ex, ok := db(r.Context())
			if !ok {
				http.Error(w, "no db", http.StatusInternalServerError)
				return
			}
			if _, err := ex.Exec(r.Context(), insert, r.Header.Get("Idempotency-Key")); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "created")
		})
	}
	bare := httptest.NewServer(handler(func(context.Context) (execer, bool) { return s.Pool(), true }))
	defer bare.Close()
	mw := idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)
	idem := httptest.NewServer(mw(handler(func(ctx context.Context) (execer, bool) { return pgstore.TxFrom(ctx) })))
	defer idem.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 4 * clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	send := func(url, key string, want int) error {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"qty":1}`))
		if err != nil {
			return err
		}
		req.Header.Set("Idempotency-Key", key)
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != want {
			return fmt.Errorf("%s: status %d", key, res.StatusCode)
		}
		return nil
	}
	b.Run("bare", func(b *testing.B) {
		parallel(b, rt, func(_ context.Context, i int64) error { return send(bare.URL, fmt.Sprint("hb-", i), 201) })
	})
	b.Run("first-execution", func(b *testing.B) {
		parallel(b, rt, func(_ context.Context, i int64) error { return send(idem.URL, fmt.Sprint("hf-", i), 201) })
	})
	// Interleaved rounds of both, so that load from elsewhere on the machine
	// weighs on both sides of the ratio alike.
	b.Run("ratio", func(b *testing.B) {
		const perRound = 400
		var bareTime, idemTime time.Duration
		round := func(url, prefix string) time.Duration {
			start := time.Now()
			var wg sync.WaitGroup
			next := make(chan int64)
			for range clients {
				wg.Go(func() {
					for i := range next {
						if err := send(url, fmt.Sprint(prefix, i), 201); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for range perRound {
				next <- seq.Add(1)
			}
			close(next)
			wg.Wait()
			return time.Since(start)
		}
		for range b.N {
			bareTime += round(bare.URL, "rb-")
			idemTime += round(idem.URL, "ri-")
		}
		n := float64(b.N * perRound)
		b.ReportMetric(n/bareTime.Seconds(), "bare-req/s")
		b.ReportMetric(n/idemTime.Seconds(), "idempotent-req/s")
		b.ReportMetric(bareTime.Seconds()/idemTime.Seconds(), "ratio")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("replay", func(b *testing.B) {
		const keys = 64
		base := seq.Add(keys)
		for i := base; i < base+keys; i++ {
			if err := send(idem.URL, fmt.Sprint("hr-", i), 201); err != nil {
				b.Fatal(err)
			}
		}
		parallel(b, rt, func(_ context.Context, i int64) error {
			return send(idem.URL, fmt.Sprint("hr-", base+i%keys), 201)
		})
	})
}

// execer is the part of a pool or transaction the benchmark handler uses.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}
