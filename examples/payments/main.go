// Command payments shows what a stable Idempotency-Key buys on a faulty
// network.
//
// It starts a small payment service, guarded by the idempotency middleware
// (an in-memory store, or PostgreSQL, Redis or MySQL with -store), behind a fault-injecting proxy on loopback that
// drops responses after the service has charged, resets connections before
// forwarding, and adds latency. It then sends the same charges twice over:
// once with this module's client (retry.NewClient, which adds a key to every
// POST and keeps it on every attempt) and once with a naive loop that
// re-POSTs on any error or 5xx without a key. The table at the end counts
// what the service really did.
//
// Usage:
//
//	go run ./examples/payments [-n 1000] [-seed 1] [-drop 0.03] [-reset 0.03]
//	    [-latency 2ms] [-concurrency 16] [-short] [-store memory|postgres|redis|mysql]
//	    [-dsn URL] [-redis ADDR] [-mysql DSN]
//	    [-otel stdout] [-crash]
//
// The faults are a pure function of the seed, the request body and how many
// times the proxy has seen that body, so a seed gives the same faults to both
// clients whatever the scheduling.
//
// With -store=postgres the service keeps its keys in PostgreSQL (pgstore, in
// a fresh schema dropped afterwards): -dsn, or EXACTLYONCE_PG_DSN, names the
// server (default: 127.0.0.1:5432, database test). With -store=redis it
// keeps them in Redis (redisstore, under a key prefix of the run's, deleted
// afterwards): -redis, or EXACTLYONCE_REDIS_ADDR, names the server (default
// 127.0.0.1:6379). With -store=mysql it keeps them in MySQL or MariaDB
// (mysqlstore, in tables of the run's, dropped afterwards): -mysql, or
// EXACTLYONCE_MYSQL_DSN, names the server (default
// root@tcp(127.0.0.1:3306)/test). The examples are a module of their own, so
// the drivers never reach users of the root module.
//
// With -otel=stdout the demo also shows its OpenTelemetry (the otelretry
// module): our client's retry loops and the service's Runner report to an
// SDK whose stdout exporters write JSON to stderr (the table stays alone on
// stdout, so "2>telemetry.json" keeps them apart). About 1% of the charges
// are traced, each whole: the client's span of the logical request, otelhttp's
// span of each attempt, and the service's server span with the outcome
// (executed, replayed, ...) as an attribute and an event. The metrics
// (exactlyonce.retry.attempts, exactlyonce.idempotency.outcomes, the
// budget's tokens, ...) are exported once, at the end.
//
// With -crash the service is killed once per client, about a third of the
// way through the charges, at the first charge made after that point: the
// service's handlers stop where they stand, between their charge and its
// completion, as a dead process would, and its server closes its listener
// and connections. Another instance starts at once on the same address
// and store (the same MemoryStore, which lives in this process, or the
// same PostgreSQL schema, Redis key prefix or MySQL tables), with a
// Reconciler. The service charges in an
// idempotency Step, and its payment provider deduplicates by the step's
// key, so an execution resumed after the crash, by the Reconciler or by
// a client's retry that takes it over once its one-second lease ran out,
// never charges twice. The table gains a column, stuck: the keyed requests
// still in progress at the end, once the Reconciler had a few passes to
// finish them; a line per client tells when the service was killed and
// who finished what it left.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
)

// maxRunTime bounds a whole run of the demo.
const maxRunTime = 2 * time.Minute

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the demo with args and returns the exit code: 0 on success,
// 2 for bad flags, 1 when the run fails.
func realMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg.holdDone = ctx.Done()
	ctx, cancel := context.WithTimeout(ctx, maxRunTime)
	defer cancel()
	if _, err := run(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "payments:", err)
		return 1
	}
	return 0
}
