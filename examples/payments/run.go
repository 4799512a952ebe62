package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/examples/internal/opspage"
	"github.com/exactlyonce/retry/opsui"
)

// result counts what one client's run did.
type result struct {
	Client string
	// Requested is the number of logical charges sent.
	Requested int
	// Executed is the number of charges the service performed, duplicates
	// included; Distinct the number of different charges among them.
	Executed, Distinct int
	// Duplicates is Executed - Distinct: cards charged more than once.
	Duplicates int
	// Attempts is the number of requests that reached the proxy.
	Attempts int
	// Failures is the number of charges the client gave up on.
	Failures int
	// Drops and Resets are the faults the proxy injected.
	Drops, Resets int
	Elapsed       time.Duration

	// With -crash:
	// Crashed reports that the service was killed and restarted.
	Crashed bool
	// KilledAt is how many charges the service had performed when it was
	// killed; CrashedInFlight is how many requests the killed instance
	// left unfinished.
	KilledAt, CrashedInFlight int
	// Reconciled and TakenOver count the executions finished after a
	// takeover: by the Reconciler, and by a client's retry.
	Reconciled, TakenOver int
	// Deduplicated is how many charges the payment provider recognised by
	// their key (a charge step called again after the crash).
	Deduplicated int
	// Stuck is how many keyed requests were still in progress in the
	// store at the end (0 by definition for a client without keys).
	Stuck int
}

// clientKind names a client and how to make it.
type clientKind struct {
	name string
	make func(url string, tel *telemetry) (charger, error)
}

// clientKinds are the clients compared, ours first.
var clientKinds = []clientKind{
	{"exactlyonce (key)", newOurs},
	{"naive loop (no key)", newNaive},
}

// run charges a fresh service with each client in turn, reports progress to
// stderr and writes the table to stdout. With cfg.OTel, the telemetry goes
// to stderr too: spans as they are exported, metrics at the end.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) (results []result, err error) {
	stderr = &lockedWriter{w: stderr} // progress and exporters write from several goroutines
	tel, err := newTelemetry(cfg.OTel, stderr)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := tel.shutdown(sctx); serr != nil && err == nil {
			err = fmt.Errorf("OpenTelemetry: %w", serr)
		}
	}()
	fmt.Fprintf(stderr, "charging %d times per client: drop %.0f%%, reset %.0f%%, latency up to %v, %d in flight, seed %d, %s store\n",
		cfg.Charges, 100*cfg.Drop, 100*cfg.Reset, cfg.Latency, cfg.Concurrency, cfg.Seed, cfg.Store)
	if cfg.Crash {
		fmt.Fprintf(stderr, "killing the service once per client, at the first charge made once %d were requested; lease %v, reconciling every %v\n",
			crashAt(cfg.Charges), crashLease, reconcileInterval)
	}
	page, err := opspage.Start(stderr)
	if err != nil {
		return nil, fmt.Errorf("operator page: %w", err)
	}
	defer page.Close()
	// held are the teardowns of the keyed client's run, kept for -hold.
	var held []func()
	defer func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}()
	results = make([]result, 0, len(clientKinds))
	for _, k := range clientKinds {
		r, err := runClient(ctx, cfg, k, tel, stderr, page, &held)
		if err != nil {
			return results, fmt.Errorf("%s: %w", k.name, err)
		}
		results = append(results, r)
	}
	writeTable(stdout, results, cfg.Crash)
	if cfg.Hold && cfg.holdDone != nil {
		fmt.Fprintf(stderr, "holding: the operator page %s shows the keyed client's service; interrupt (Ctrl-C) to end\n", page.URL)
		<-cfg.holdDone
	}
	return results, nil
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// crashAt is how many of n charges are requested before -crash kills the
// service: about a third.
func crashAt(n int) int64 {
	return int64(max(1, n/3))
}

// runClient sends cfg.Charges charges with one client through a new proxy
// to a new service and counts what happened. tel, if not nil, instruments
// the service and our client. With cfg.Crash the service is killed once
// and restarted (see deployment). The operator page shows our client's
// run; with cfg.Hold its teardowns go to held instead of running now.
func runClient(ctx context.Context, cfg config, k clientKind, tel *telemetry, stderr io.Writer,
	page *opspage.Page, held *[]func()) (result, error) {
	ours := k.name == clientKinds[0].name
	var teardown []func()
	cleanup := func(f func()) { teardown = append(teardown, f) }
	defer func() {
		if ours && cfg.Hold {
			*held = append(*held, teardown...)
			return
		}
		for i := len(teardown) - 1; i >= 0; i-- {
			teardown[i]()
		}
	}()
	l := newLedger()
	open, removeStore, err := openStore(ctx, cfg)
	if err != nil {
		return result{}, err
	}
	cleanup(removeStore)
	var (
		requested atomic.Int64
		plan      *crashPlan
	)
	if cfg.Crash {
		plan = &crashPlan{at: crashAt(cfg.Charges), requested: &requested}
	}
	svc, err := startDeployment(ctx, k.name, l, open, tel, plan, stderr)
	if err != nil {
		return result{}, err
	}
	cleanup(svc.stop)
	p := newProxy(faultPlan{seed: cfg.Seed, drop: cfg.Drop, reset: cfg.Reset, latency: cfg.Latency}, svc.url())
	cleanup(p.close)
	proxyURL, stopProxy, err := serve(p)
	if err != nil {
		return result{}, err
	}
	cleanup(stopProxy)
	c, err := k.make(proxyURL, tel)
	if err != nil {
		return result{}, err
	}
	cleanup(c.close)
	if hc, ok := c.(*httpCharger); ok && ours {
		if tr, ok := hc.client.Transport.(*retry.Transport); ok {
			svc.show(page, []opsui.Client{opsui.TransportClient("payments client", tr)})
		}
	}

	start := time.Now()
	prog := &progress{name: k.name, total: cfg.Charges, w: stderr, start: start, attempts: &p.attempts}
	var failures atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for i := range jobs {
				ch := chargeRequest{Ref: fmt.Sprintf("order-%06d", i), AmountCents: int64(100 + i%900)}
				requested.Add(1)
				if err := c.charge(ctx, ch); err != nil {
					failures.Add(1)
				}
				prog.done()
			}
		})
	}
feed:
	for i := range cfg.Charges {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	stuck, err := svc.settle(ctx)
	if err != nil {
		return result{}, err
	}
	killedAt, inFlight, crashed, err := svc.crashReport()
	if err != nil {
		return result{}, err
	}
	executed, distinct := l.totals()
	return result{
		Client:          k.name,
		Requested:       cfg.Charges,
		Executed:        executed,
		Distinct:        distinct,
		Duplicates:      executed - distinct,
		Attempts:        int(p.attempts.Load()),
		Failures:        int(failures.Load()),
		Drops:           int(p.drops.Load()),
		Resets:          int(p.resets.Load()),
		Elapsed:         elapsed,
		Crashed:         crashed,
		KilledAt:        killedAt,
		CrashedInFlight: inFlight,
		Reconciled:      int(svc.reconciled.Load()),
		TakenOver:       int(svc.takenOver.Load()),
		Deduplicated:    l.deduplications(),
		Stuck:           stuck,
	}, nil
}

// progress writes a line to w each time another tenth of the charges is done.
type progress struct {
	name     string
	total    int
	w        io.Writer
	start    time.Time
	attempts *atomic.Int64

	mu     sync.Mutex
	n      int
	tenths int
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if t := p.n * 10 / p.total; t > p.tenths {
		p.tenths = t
		fmt.Fprintf(p.w, "%-20s %3d%%  %d/%d charges, %d attempts, %v\n", p.name, 10*t, p.n, p.total,
			p.attempts.Load(), time.Since(p.start).Round(time.Millisecond))
	}
}

// serve runs h on a new loopback listener and returns its base URL and a
// function that stops it.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quietLog()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return "http://" + ln.Addr().String(), func() {
		srv.Close()
		<-done
	}, nil
}
