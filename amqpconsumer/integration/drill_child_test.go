package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/internal/drill"
)

// Environment of the stop drill's child process.
const (
	drillChildEnv      = "EXACTLYONCE_TEST_DRILL_SCHEMA"
	drillQueueEnv      = "EXACTLYONCE_TEST_DRILL_QUEUE"
	drillDependencyEnv = "EXACTLYONCE_TEST_DRILL_DEPENDENCY"
	drillLogEnv        = "EXACTLYONCE_TEST_DRILL_LOG"
	drillLimitEnv      = "EXACTLYONCE_TEST_DRILL_LIMIT" // the queue's delivery limit
)

// drillChild runs in a child process: a consumer of the drill's queue
// that stops, as a service's main does, when the process gets SIGTERM. It
// prints drill.LineRunning once it runs, drill.LineOutage once it saw its dependency
// down, and drill.LineStopped with its stats once Run returned.
func drillChild(schema, queue, depURL string) int {
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
	conn, err := amqp.Dial(amqptest.URL())
	if err != nil {
		return fail(err)
	}
	logFile, err := os.Create(os.Getenv(drillLogEnv))
	if err != nil {
		return fail(err)
	}
	defer logFile.Close()
	log := drillLogger(logFile)
	budget := retry.NewBudget(0.1, 1, 20)
	limit, _ := strconv.Atoi(os.Getenv(drillLimitEnv))
	c, err := amqpconsumer.New(conn, queue, drillConfig(idempotency.NewRunner(store, idempotency.WithLease(drillLease)),
		drill.Handler(schema, depURL, budget), budget, log), amqpconsumer.WithDeliveryLimit(limit))
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
func drillConfig(runner *idempotency.Runner, handler consumer.Handler, budget *retry.Budget, log *slog.Logger) consumer.Config {
	return consumer.Config{
		Runner: runner, Handler: handler, DependsOn: []*retry.Budget{budget},
		StopGrace: drillGrace, ReconcileInterval: 200 * time.Millisecond, Logger: log,
		MaxDeliveries: drillMaxDeliveries,
		Observer: func(_ context.Context, e consumer.Event) {
			if e.Kind == consumer.EventSettled {
				log.Debug("settled", slog.String("key", e.Key), slog.Int("delivery", e.Delivery),
					slog.String("outcome", string(e.Outcome)), slog.Any("error", e.Err))
			}
		},
	}
}

// drillLogger logs everything to w, for the report of a failed drill.
func drillLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// quiet is a logger that discards, for consumers whose warnings are expected.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
