package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// Cases of the store under the package's own users: Runner.Do, the
// Middleware, the Reconciler and the Sweeper.

var errCrash = errors.New("storetest: the execution crashed")

// Runner.Do on the store: many goroutines on one key run the work once, a
// repeat replays, a rejection frees the key.
func testRunnerRunsOnce(t *testing.T, h Harness) {
	ctx := context.Background()
	runner := idempotency.NewRunner(h.Store)
	var runs atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			res, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: "job-1", Fingerprint: "fp"},
				func(context.Context, *idempotency.Execution) ([]byte, error) {
					runs.Add(1)
					return []byte("done"), nil
				})
			var busy *idempotency.InProgressError
			switch {
			case errors.As(err, &busy):
			case err != nil:
				t.Errorf("Do: %v", err)
			case string(res.Response) != "done":
				t.Errorf("Do returned %q", res.Response)
			}
		})
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("the work ran %d times", n)
	}
	res, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: "job-1", Fingerprint: "fp"}, nil)
	noErr(t, "Do of a completed key", err)
	if !res.Replayed || string(res.Response) != "done" {
		t.Fatalf("a repeat got %+v", res)
	}
	_, err = runner.Do(ctx, idempotency.Request{Caller: "c", Key: "job-2", Fingerprint: "fp"},
		func(context.Context, *idempotency.Execution) ([]byte, error) {
			return nil, idempotency.Reject(errors.New("bad"))
		})
	wantErr(t, "Do of a rejected request", err, idempotency.ErrRejected)
	wantNotFound(t, h.Store, "c", "job-2")
}

// Executions that stalled after a step are resumed by a Reconciler with
// the registered work (the step's result kept, not run again); one with no
// work registered is parked, listed, and run again by RetryParked once its
// work is there.
func testReconciler(t *testing.T, h Harness) {
	ctx := context.Background()
	quiet := idempotency.ReconcilerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var charges atomic.Int32
	work := func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		ch, err := e.Step(ctx, "charge", func(context.Context, string) ([]byte, error) {
			charges.Add(1)
			return []byte("ch_1"), nil
		})
		if err != nil {
			return nil, err
		}
		return append([]byte("paid "), ch...), nil
	}
	runner := idempotency.NewRunner(h.Store)
	runner.Register("pay", work)
	// A first attempt charges and dies before completing: its lease is
	// cut short, so the execution is stalled once the clock moves at all.
	for i := range 3 {
		_, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: fmt.Sprint("k", i), Work: "pay", Input: []byte("in")},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				if _, err := work(ctx, e); err != nil {
					return nil, err
				}
				return nil, errCrash
			})
		wantErr(t, "Do of a crashing work", err, errCrash)
	}
	h.Advance(slack)
	n, err := runner.Reconcile(ctx, quiet)
	noErr(t, "Reconcile", err)
	if n != 3 || charges.Load() != 3 {
		t.Fatalf("Reconcile resumed %d executions, with %d charges in all; want 3 and 3 (each step's result kept)", n, charges.Load())
	}
	for i := range 3 {
		res, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: fmt.Sprint("k", i), Work: "pay", Input: []byte("in")}, nil)
		noErr(t, "Do after Reconcile", err)
		if !res.Replayed || string(res.Response) != "paid ch_1" {
			t.Fatalf("after Reconcile, a repeat got %+v", res)
		}
	}

	// No work registered under the name: parked, listed, then retried.
	other := idempotency.NewRunner(h.Store)
	_, err = other.Do(ctx, idempotency.Request{Caller: "c", Key: "lost", Work: "refund"},
		func(_ context.Context, e *idempotency.Execution) ([]byte, error) {
			e.MarkStarted()
			return nil, errCrash
		})
	wantErr(t, "Do of a crashing work", err, errCrash)
	h.Advance(slack)
	n, err = other.Reconcile(ctx, quiet)
	noErr(t, "Reconcile", err)
	parked, err := h.Store.ListParked(ctx, "", "", 0)
	noErr(t, "ListParked", err)
	if n != 1 || len(parked) != 1 || parked[0].Key != "lost" || !strings.Contains(parked[0].Parked, "refund") {
		t.Fatalf("Reconcile handled %d; parked %+v", n, parked)
	}
	other.Register("refund", func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("refunded"), nil })
	res, err := other.RetryParked(ctx, "c", "lost")
	noErr(t, "RetryParked", err)
	if string(res.Response) != "refunded" {
		t.Fatalf("RetryParked got %+v", res)
	}
	if parked, _ := h.Store.ListParked(ctx, "", "", 0); len(parked) != 0 {
		t.Fatalf("still parked after RetryParked: %+v", parked)
	}
}

// Sweepers at once with claims replacing the same expired records: every
// expired record is removed once or replaced, every claim creates a fresh
// record, nothing live is removed; then the Sweeper on its own goroutine
// removes what expires next.
func testSweepersRaceClaims(t *testing.T, h Harness) {
	ctx := context.Background()
	const keys = 120
	for i := range keys {
		claim(t, h.Store, claimReq("alice", fmt.Sprint("k", i), "fp"), idempotency.ClaimCreated)
	}
	h.Advance(ttl + slack)
	var (
		wg      sync.WaitGroup
		removed atomic.Int64
	)
	for range 3 {
		wg.Go(func() {
			n, err := idempotency.SweeperConfig{Batch: 16}.Sweep(ctx, h.Store)
			if err != nil {
				t.Errorf("Sweep: %v", err)
			}
			removed.Add(int64(n))
		})
	}
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < keys; i += 8 {
				c, err := h.Store.Claim(ctx, claimReq("alice", fmt.Sprint("k", i), "fp"))
				if err != nil || c.Outcome != idempotency.ClaimCreated {
					t.Errorf("claim of an expired key: %s, %v", outcomeName(c.Outcome), err)
				}
			}
		})
	}
	wg.Wait()
	n, err := h.Store.DeleteExpired(ctx, 0)
	noErr(t, "DeleteExpired", err)
	// A record a claim replaced first is not there to remove; one a
	// sweeper removed first, the claim makes afresh. A store may also
	// reclaim expired records as it claims (MemoryStore does), so fewer
	// may be counted here; none is counted twice, and the reads below
	// check that every expired record is gone.
	if total := removed.Load() + int64(n); total > keys {
		t.Fatalf("removed %d of %d expired records", total, keys)
	}
	for i := range keys {
		if i%8 < 4 {
			get(t, h.Store, "alice", fmt.Sprint("k", i))
		} else {
			wantNotFound(t, h.Store, "alice", fmt.Sprint("k", i))
		}
	}
	h.Advance(ttl + slack)
	sweeps := make(chan int, 1)
	sw := idempotency.StartSweeper(h.Store, idempotency.SweeperConfig{Interval: time.Millisecond, OnSweep: func(n int, err error) {
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		select {
		case sweeps <- n:
		default:
		}
	}})
	defer sw.Stop()
	if n := <-sweeps; n != keys/2 {
		t.Fatalf("the Sweeper removed %d, want %d", n, keys/2)
	}
}

// Two service instances (Runners behind the Middleware, each with its own
// HTTP server) on the store: 120 requests on 12 keys spread over both run
// each key once (its local write committed with the response, for a
// TxStore), and every answer for a key is the same.
func testMiddlewareRunsEachKeyOnce(t *testing.T, h Harness) {
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		idempotency.MarkStarted(ctx)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		runs[key]++
		mu.Unlock()
		if _, ok := h.Store.(idempotency.TxStore); ok && h.TxWrite != nil {
			if err := h.TxWrite(ctx, key); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %s", key)
	})
	var urls []string
	for range 2 {
		srv := httptest.NewServer(idempotency.Middleware(idempotency.NewRunner(h.Store), idempotency.SingleTenant)(handler))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	const requests, keys = 120, 12
	var (
		wg      sync.WaitGroup
		jobs    = make(chan int)
		answers = map[string]map[string]bool{}
	)
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				key := fmt.Sprint("key-", i%keys)
				req, err := http.NewRequest(http.MethodPost, urls[(i/keys)%2], strings.NewReader(`{"qty":1}`))
				if err != nil {
					t.Error(err)
					continue
				}
				req.Header.Set("Idempotency-Key", key)
				res, err := client.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				b, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				if res.StatusCode == http.StatusConflict {
					continue // the first request was still running
				}
				mu.Lock()
				if answers[key] == nil {
					answers[key] = map[string]bool{}
				}
				answers[key][fmt.Sprint(res.StatusCode, " ", string(b))] = true
				mu.Unlock()
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for k := range keys {
		key := fmt.Sprint("key-", k)
		if runs[key] != 1 {
			t.Errorf("%s ran %d times", key, runs[key])
		}
		for a := range answers[key] {
			if a != "201 order "+key {
				t.Errorf("%s answered %q", key, a)
			}
		}
		wantWritten(t, h, key, true)
	}
}
