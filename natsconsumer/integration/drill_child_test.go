package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/internal/drill"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// Environment of the stop drill's child process.
const (
	drillChildEnv      = "EXACTLYONCE_TEST_DRILL_SCHEMA"
	drillStreamEnv     = "EXACTLYONCE_TEST_DRILL_STREAM"
	drillDependencyEnv = "EXACTLYONCE_TEST_DRILL_DEPENDENCY"
)

// drillChild runs in a child process: a consumer of the drill's stream
// that stops, as a service's main does, when the process gets SIGTERM. It
// prints drill.LineRunning once it runs, drill.LineOutage once it saw its dependency
// down, and drill.LineStopped with its stats once Run returned.
func drillChild(schema, stream, depURL string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "drill child:", err)
		return 1
	}
	pool, err := pgxpool.New(ctx, pgDSN())
	if err != nil {
		return fail(err)
	}
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(natstest.URL())
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	cons, err := js.Consumer(ctx, stream, "work")
	if err != nil {
		return fail(err)
	}
	budget := retry.NewBudget(0.1, 1, 20)
	c, err := natsconsumer.New(cons, drillConfig(idempotency.NewRunner(store, idempotency.WithLease(drillLease)),
		drill.Handler(schema, depURL, budget), budget))
	if err != nil {
		return fail(err)
	}
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if c.Stats().Outages > 0 {
				fmt.Println(drill.LineOutage)
				return
			}
		}
	}()
	signalled := make(chan time.Time, 1)
	context.AfterFunc(ctx, func() { signalled <- time.Now() })
	fmt.Println(drill.LineRunning)
	if err := c.Run(ctx); !errors.Is(err, context.Canceled) {
		return fail(fmt.Errorf("Run returned %v, want context.Canceled", err))
	}
	fmt.Printf("%s (Run returned %v after SIGTERM) %+v\n", drill.LineStopped, time.Since(<-signalled).Round(time.Millisecond), c.Stats())
	return 0
}

// drillConfig is the configuration of the drill's consumers.
func drillConfig(runner *idempotency.Runner, handler consumer.Handler, budget *retry.Budget) consumer.Config {
	return consumer.Config{
		Runner: runner, Handler: handler, DependsOn: []*retry.Budget{budget},
		StopGrace: drillGrace, ReconcileInterval: 200 * time.Millisecond, Logger: natstest.Quiet(),
		MaxDeliveries: drillMaxDeliveries,
	}
}
