// Command orders shows what a consumer with exactly-once effect buys over
// the consumers Go services usually run, on real brokers: NATS JetStream
// and RabbitMQ.
//
// For each broker it publishes the same orders (publisher retries send
// some twice, as a publisher whose ack was lost does) and has them shipped
// by three kinds of consumer, two instances each:
//
//   - exactlyonce: natsconsumer or amqpconsumer over idempotency.Runner,
//     its warehouse call in a recovery step with a downstream key, a
//     shared retry.Budget for the warehouse (riding through its outage);
//   - plain: acks after its handler, naks when it fails;
//   - mark before: a deduplicator that marks a message seen before its
//     handler runs and never unmarks it, as Watermill's Deduplicator does.
//
// Every run meets the same faults: 5% of handler calls fail transiently
// (half before the warehouse call, half after it), the warehouse is down
// for 3 s once 60% of the orders shipped, and one instance is killed
// SIGKILL-style mid-handler once a third of the orders shipped (between its
// warehouse call and its ack: its connections are cut, its handlers stop
// where they stand, its store writes fail) and restarted. The warehouse
// deduplicates a reservation by its key, as a well-built service does;
// the plain and mark-before consumers send none. The table counts what the
// warehouse really did.
//
// Usage:
//
//	go run ./examples/orders [-n 10000] [-store memory|postgres] [-dsn URL]
//	    [-broker all|nats|rabbitmq] [-seed 1] [-fail 0.05] [-outage 3s] [-short]
//	    [-otel stdout]
//
// The brokers are NATS with JetStream at EXACTLYONCE_NATS_URL (default
// nats://127.0.0.1:4222) and RabbitMQ at EXACTLYONCE_AMQP_URL (default
// amqp://guest:guest@127.0.0.1:5672/); every run uses streams and queues
// of its own and deletes them. With -store=postgres our consumers keep
// their keys in PostgreSQL (pgstore, a fresh schema dropped afterwards).
// With -otel=stdout the demo also exports our consumers' metrics
// (otelretry: deliveries by outcome, handler durations, fetch sizes, the
// brokers' waits and each instance's counts) as JSON on stderr when the
// run ends. SIGTERM and an interrupt stop the run: the consumers stop
// within their grace period (consumer.Config.StopGrace).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// maxRunTime bounds a whole run of the demo.
const maxRunTime = 15 * time.Minute

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the demo with args and returns the exit code: 0 on
// success, 2 for bad flags, 1 when the run fails.
func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	// SIGTERM, as a process manager stops a service, stops the consumers
	// like an interrupt: they stop within their grace period.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.holdDone = ctx.Done()
	ctx, cancel := context.WithTimeout(ctx, maxRunTime)
	defer cancel()
	if cfg.telemetry, err = newTelemetry(cfg.OTel, stderr); err != nil {
		fmt.Fprintln(stderr, "orders:", err)
		return 1
	}
	_, err = run(ctx, cfg, stdout, stderr)
	if terr := cfg.telemetry.shutdown(context.WithoutCancel(ctx)); terr != nil {
		fmt.Fprintln(stderr, "orders: telemetry:", terr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "orders:", err)
		return 1
	}
	return 0
}
