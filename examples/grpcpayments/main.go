// Command grpcpayments is the payments demo over gRPC: what a stable
// idempotency key buys on a faulty network, against grpc-go's own retry.
//
// It starts a payment service (grpcretry's server interceptor on an
// in-memory idempotency.Runner, in front of a ledger) behind a proxy on
// loopback that reads the HTTP/2 frames going through and, for a share of
// the calls, resets the connection after the service has charged, before
// its answer goes back (drop), or before the request reaches it (reset).
// It then sends the same charges with each client in turn, each charge on
// one of -concurrency connections:
//
//   - exactlyonce: grpcretry's Client. Charge is not declared idempotent,
//     so every call carries a key, the same on each of its attempts; the
//     service answers a retry of a charge it made from its store.
//   - grpc-go's built-in retry, with a retryPolicy that lists UNAVAILABLE
//     (and retryThrottling): a dropped answer is retried without a key,
//     and the card is charged again.
//
// The table at the end counts what the ledger really did.
//
// Usage:
//
//	go run ./examples/grpcpayments [-n 1000] [-seed 1] [-drop 0.03] [-reset 0.03] [-concurrency 16]
//
// The faults are a pure function of the seed, the request message and how
// many times the proxy has seen it, so a seed gives the same faults to
// both clients whatever the scheduling.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// maxRunTime bounds a whole run of the demo.
const maxRunTime = 2 * time.Minute

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags set.
type config struct {
	Charges     int
	Seed        uint64
	Drop, Reset float64
	Concurrency int
}

// realMain runs the demo with args and returns the exit code: 0 on
// success, 2 for bad flags, 1 when the run fails.
func realMain(args []string, stdout, stderr io.Writer) int {
	cfg := config{}
	fs := flag.NewFlagSet("grpcpayments", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Charges, "n", 1000, "charges per client")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the injected faults")
	fs.Float64Var(&cfg.Drop, "drop", 0.03, "share of calls whose answer is dropped after the service charged")
	fs.Float64Var(&cfg.Reset, "reset", 0.03, "share of calls whose connection is reset before the service sees them")
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "charges in flight at once, each on a connection of its own")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.Charges < 1 || cfg.Charges > 100_000 || cfg.Concurrency < 1 || cfg.Concurrency > 256 ||
		cfg.Drop < 0 || cfg.Reset < 0 || cfg.Drop+cfg.Reset > 0.5 {
		fmt.Fprintln(stderr, "grpcpayments: -n 1..100000, -concurrency 1..256, -drop and -reset >= 0 with a sum of at most 0.5")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, maxRunTime)
	defer cancel()
	if _, err := run(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "grpcpayments:", err)
		return 1
	}
	return 0
}

// result counts what one client's run did.
type result struct {
	Client     string
	Requested  int
	Executed   int // charges the ledger performed, duplicates included
	Duplicates int // Executed - distinct charges
	Attempts   int // request messages that reached the proxy
	Failures   int // charges the client gave up on
	Drops      int
	Resets     int
	Elapsed    time.Duration
}

// run charges a fresh service with each client in turn and writes the
// table to stdout.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) ([]result, error) {
	fmt.Fprintf(stderr, "charging %d times per client over gRPC: drop %.0f%%, reset %.0f%%, %d connections, seed %d\n",
		cfg.Charges, 100*cfg.Drop, 100*cfg.Reset, cfg.Concurrency, cfg.Seed)
	var results []result
	for _, k := range clientKinds {
		r, err := runClient(ctx, cfg, k)
		if err != nil {
			return results, fmt.Errorf("%s: %w", k.name, err)
		}
		fmt.Fprintf(stderr, "%s: done in %v\n", k.name, r.Elapsed.Round(time.Millisecond))
		results = append(results, r)
	}
	writeTable(stdout, results)
	return results, nil
}

// runClient sends cfg.Charges charges with one client through a new proxy
// to a new service and counts what happened.
func runClient(ctx context.Context, cfg config, k clientKind) (result, error) {
	l := newLedger()
	runner := idempotency.NewRunner(nil)
	dedup := grpcretry.NewServerInterceptor(runner, grpcretry.SingleTenant, grpcretry.WithOptionalKeys())
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary, dedup.Unary))
	paymentspb.RegisterPaymentsServer(srv, &service{ledger: l})
	stopService, serviceAddr, err := listen(func(ln net.Listener) { _ = srv.Serve(ln) }, srv.Stop)
	if err != nil {
		return result{}, err
	}
	defer stopService()
	p := newProxy(faultPlan{seed: cfg.Seed, drop: cfg.Drop, reset: cfg.Reset}, serviceAddr)
	stopProxy, proxyAddr, err := listen(p.serve, func() {})
	if err != nil {
		return result{}, err
	}

	opts := append(k.dial(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	conns := make([]*grpc.ClientConn, cfg.Concurrency)
	for i := range conns {
		if conns[i], err = grpc.NewClient(proxyAddr, opts...); err != nil {
			return result{}, err
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		stopProxy()
		p.close()
	}()

	start := time.Now()
	var failures atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := range cfg.Concurrency {
		client := paymentspb.NewPaymentsClient(conns[w])
		wg.Go(func() {
			for i := range jobs {
				cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
				_, err := client.Charge(cctx, &paymentspb.ChargeRequest{
					Account: fmt.Sprintf("order-%06d", i), AmountCents: int64(100 + i%900)})
				cancel()
				if err != nil {
					failures.Add(1)
				}
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
	executed, distinct := l.totals()
	return result{
		Client: k.name, Requested: cfg.Charges, Executed: executed, Duplicates: executed - distinct,
		Attempts: int(p.attempts.Load()), Failures: int(failures.Load()),
		Drops: int(p.drops.Load()), Resets: int(p.resets.Load()), Elapsed: time.Since(start),
	}, nil
}

// listen runs serve on a new loopback listener and returns a function that
// stops it (with stop, then by closing the listener) and the address.
func listen(serve func(net.Listener), stop func()) (func(), string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(ln)
	}()
	return func() {
		stop()
		ln.Close()
		<-done
	}, ln.Addr().String(), nil
}

// writeTable writes the results as an aligned table.
func writeTable(w io.Writer, rs []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "client\tcharges requested\texecuted\tduplicates\tattempts sent\tfailures\tfaults (drop/reset)\ttime\t\n")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%v\t\n", r.Client, r.Requested, r.Executed, r.Duplicates,
			r.Attempts, r.Failures, r.Drops, r.Resets, r.Elapsed.Round(10*time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintln(w, "executed: charges the service performed, duplicates included; attempts sent: calls that reached the proxy.")
}
