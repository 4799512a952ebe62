package storetest

import (
	"context"
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

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

// ChaosConfig describes a chaos run (RunChaos): service instances on one
// store server that is killed and restarted while clients send requests.
type ChaosConfig struct {
	// Open opens the store on the server for one service instance, with
	// connections of its own; RunChaos calls it once per instance. Close
	// what it opens with t.Cleanup. Required.
	Open func(t *testing.T) idempotency.Store
	// Kill kills the server abruptly (SIGKILL) and returns once it is dead;
	// Restart starts it again on the same data and address and returns once
	// it answers. Required.
	Kill, Restart func(t *testing.T)
	// Instances is how many service instances serve (default 3).
	Instances int
	// Keys and Requests: every key is sent Requests/Keys times, in rounds
	// (default 500 keys, 1,500 requests), by Clients at once (default 16).
	Keys, Requests, Clients int
	// Lease is the Runners' lease (default 2 s): how soon an execution the
	// outage cut short may be taken over.
	Lease time.Duration
	// KillAfter is how many requests are sent before the kill (default a
	// third of them).
	KillAfter int
	// Down is how long the server stays dead before Restart (default 1.5 s):
	// long enough for the clients' retries and the Runners' leases to meet
	// the outage, not only the store clients' own reconnects.
	Down time.Duration
	// Settle bounds the wait, after the last response, for the keys still in
	// progress to complete (default 60 s).
	Settle time.Duration
}

func (c ChaosConfig) withDefaults() ChaosConfig {
	if c.Instances <= 0 {
		c.Instances = 3
	}
	if c.Keys <= 0 {
		c.Keys = 500
	}
	if c.Requests <= 0 {
		c.Requests = 3 * c.Keys
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	if c.Lease <= 0 {
		c.Lease = 2 * time.Second
	}
	if c.KillAfter <= 0 {
		c.KillAfter = c.Requests / 3
	}
	if c.Down <= 0 {
		c.Down = 1500 * time.Millisecond
	}
	if c.Settle <= 0 {
		c.Settle = time.Minute
	}
	return c
}

// ChaosResult is what a chaos run measured.
type ChaosResult struct {
	// Requests sent, and those answered 201 (first or replayed).
	Requests, Succeeded int
	// Executions are the handler's runs; Charges the calls to the fake
	// payment provider (which deduplicates by the step's downstream key, as
	// a real one does, so these are calls, not effects).
	Executions, Charges int
	// Duplicates are the keys whose handler ran again after their outcome
	// was stored, or whose charge was made again after the step's result
	// was saved: work the store should have prevented and did not, because
	// it lost acknowledged writes (or fenced badly).
	Duplicates int
	// Inconsistent are the keys whose successful answers differ.
	Inconsistent int
	// Stuck are the keys still in progress in the store at the end, once
	// the Reconcilers and the Settle wait had their chance.
	Stuck int
	// KilledAt is how many requests had been sent when the server was
	// killed; InFlight how many handlers were running then; Outage the
	// time from the kill until the restarted server answered.
	KilledAt, InFlight int
	Outage             time.Duration
	// TakenOver and Reconciled count executions finished after a takeover by
	// a client's retry, and by a Reconciler.
	TakenOver, Reconciled int
}

// String summarizes the result on one line.
func (r ChaosResult) String() string {
	return fmt.Sprintf("%d of %d requests succeeded (%.1f%%), %d duplicates, %d stuck, %d inconsistent; "+
		"%d executions, %d charges; killed after %d requests with %d in flight, %v outage; "+
		"%d finished by a client's takeover, %d by a reconciler",
		r.Succeeded, r.Requests, 100*float64(r.Succeeded)/float64(max(r.Requests, 1)), r.Duplicates, r.Stuck,
		r.Inconsistent, r.Executions, r.Charges, r.KilledAt, r.InFlight, r.Outage.Round(time.Millisecond),
		r.TakenOver, r.Reconciled)
}

// chaosCaller is the caller of every chaos request.
const chaosCaller = "chaos"

// chaos is the state of one run: the service's handler and what it saw.
type chaos struct {
	mu        sync.Mutex
	completed map[string]bool // outcome stored (the Runner's Observer said so)
	saved     map[string]bool // the charge step's result saved
	dup       map[string]bool
	ledger    map[string]string // downstream key -> charge id
	runs      int
	charges   int
	inFlight  atomic.Int64
	takenOver atomic.Int64
	resumed   atomic.Int64
}

// RunChaos runs cfg.Instances service instances (each a Runner behind the
// Middleware, with WithResume and a Reconciler, on its own HTTP server and
// its own store connections) on one store server, sends cfg.Requests
// requests on cfg.Keys keys through retry.NewClient with its defaults (each
// key sent once per round, to the instances in turn, with an
// Idempotency-Key of its own), kills the server with cfg.Kill after
// cfg.KillAfter requests and starts it again with cfg.Restart cfg.Down later, while the
// requests go on, waits for the keys left in progress, and returns what it
// measured. The handler charges a fake provider in a Step. The caller
// asserts what its store promises (no duplicates with a durable store, at
// least 99% succeeded, nothing stuck).
func RunChaos(t *testing.T, cfg ChaosConfig) ChaosResult {
	t.Helper()
	cfg = cfg.withDefaults()
	if cfg.Open == nil || cfg.Kill == nil || cfg.Restart == nil {
		t.Fatal("storetest: ChaosConfig needs Open, Kill and Restart")
	}
	c := &chaos{completed: map[string]bool{}, saved: map[string]bool{}, dup: map[string]bool{}, ledger: map[string]string{}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var (
		urls  []string
		store idempotency.Store
	)
	for range cfg.Instances {
		s := cfg.Open(t)
		store = s
		runner := idempotency.NewRunner(s, idempotency.WithLease(cfg.Lease), idempotency.WithObserver(c.observe))
		mw := idempotency.Middleware(runner, func(*http.Request) (string, error) { return chaosCaller, nil },
			idempotency.WithResume("charges"))
		srv := httptest.NewServer(mw(http.HandlerFunc(c.serve)))
		t.Cleanup(srv.Close)
		rc := idempotency.StartReconciler(runner, idempotency.ReconcilerConfig{Interval: 200 * time.Millisecond, Logger: quiet})
		t.Cleanup(rc.Stop)
		urls = append(urls, srv.URL)
	}
	client := retry.NewClient()
	defer client.CloseIdleConnections()

	res := ChaosResult{Requests: cfg.Requests}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		answers  = map[string]map[string]bool{}
		jobs     = make(chan int)
		killDone = make(chan struct{})
	)
	for range cfg.Clients {
		wg.Go(func() {
			for j := range jobs {
				key := fmt.Sprintf("order-%d", j%cfg.Keys)
				status, body := chaosPost(client, urls[(j+j/cfg.Keys)%len(urls)], key)
				mu.Lock()
				if status == http.StatusCreated {
					res.Succeeded++
					if answers[key] == nil {
						answers[key] = map[string]bool{}
					}
					answers[key][body] = true
				}
				mu.Unlock()
			}
		})
	}
	for j := range cfg.Requests {
		if j == cfg.KillAfter {
			res.KilledAt, res.InFlight = j, int(c.inFlight.Load())
			go func() {
				defer close(killDone)
				start := time.Now()
				cfg.Kill(t)
				<-time.After(cfg.Down)
				cfg.Restart(t)
				res.Outage = time.Since(start)
			}()
		}
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	<-killDone

	// The keys left in progress: Reconcilers finish those that began.
	ctx := context.Background()
	deadline := time.Now().Add(cfg.Settle)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		res.Stuck = 0
		for k := range cfg.Keys {
			r, err := store.Get(ctx, chaosCaller, fmt.Sprintf("order-%d", k))
			if err == nil && r.State == idempotency.StateInProgress {
				res.Stuck++
			}
		}
		if res.Stuck == 0 || time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res.Executions, res.Charges, res.Duplicates = c.runs, c.charges, len(c.dup)
	for _, bodies := range answers {
		if len(bodies) > 1 {
			res.Inconsistent++
		}
	}
	res.TakenOver, res.Reconciled = int(c.takenOver.Load()), int(c.resumed.Load())
	return res
}

// chaosPost sends one charge for key and returns the status (0 for an
// error) and the body.
func chaosPost(client *http.Client, url, key string) (int, string) {
	req, err := http.NewRequest(http.MethodPost, url+"/charges", strings.NewReader(`{"amount":100}`))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, ""
	}
	return res.StatusCode, string(b)
}

// observe learns which keys' outcomes were stored.
func (c *chaos) observe(_ context.Context, o idempotency.Observation) {
	if o.Err != nil {
		return
	}
	switch o.Outcome {
	case idempotency.OutcomeExecuted, idempotency.OutcomeTakenOver, idempotency.OutcomeReconciled:
		c.mu.Lock()
		c.completed[o.Key] = true
		c.mu.Unlock()
	}
	switch o.Outcome {
	case idempotency.OutcomeTakenOver:
		c.takenOver.Add(1)
	case idempotency.OutcomeReconciled:
		c.resumed.Add(1)
	}
}

// serve is the service's charge handler.
func (c *chaos) serve(w http.ResponseWriter, r *http.Request) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	ctx := r.Context()
	e := idempotency.FromContext(ctx)
	key := e.Key()
	c.mu.Lock()
	c.runs++
	if c.completed[key] {
		c.dup[key] = true
	}
	c.mu.Unlock()
	idempotency.MarkStarted(ctx)
	ch, err := e.Step(ctx, "charge", func(_ context.Context, downstream string) ([]byte, error) {
		return c.charge(key, downstream), nil
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	c.mu.Lock()
	c.saved[key] = true
	c.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "charge %s", ch)
}

// charge is the fake payment provider: one charge per downstream key.
func (c *chaos) charge(key, downstream string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.charges++
	if c.saved[key] {
		c.dup[key] = true
	}
	id, ok := c.ledger[downstream]
	if !ok {
		id = fmt.Sprintf("ch_%d", len(c.ledger)+1)
		c.ledger[downstream] = id
	}
	return []byte(id)
}
