package natsconsumer_test

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go/jetstream"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
)

// warehouseClient is the quick start's downstream: it deduplicates
// reservations by the key it is given.
type warehouseClient struct{}

// Reserve reserves what body orders, once per key.
func (warehouseClient) Reserve(ctx context.Context, body []byte, key string) error { return nil }

// The README's quick start: a consumer whose effect, a reservation at a
// warehouse, happens once per message, riding out the warehouse's
// outages, stopped on SIGTERM. (Compiled, not run: it needs a server.)
func Example_quickStart() {
	ctx := context.Background()
	var (
		store           idempotency.Store  // pgstore.New(pool) for many instances
		jsConsumer      jetstream.Consumer // js.CreateOrUpdateConsumer(ctx, stream, config)
		warehouse       warehouseClient
		warehouseBudget = retry.NewBudget(0.1, 1, 20)
	)

	runner := idempotency.NewRunner(store) // pgstore for many instances
	ship := func(ctx context.Context, m *consumer.Message) error {
		_, err := idempotency.FromContext(ctx).Step(ctx, "reserve", func(ctx context.Context, key string) ([]byte, error) {
			return nil, retry.Do(ctx, func(ctx context.Context) error { return warehouse.Reserve(ctx, m.Body, key) },
				retry.WithBudget(warehouseBudget))
		})
		return err
	}
	cfg := consumer.Config{Runner: runner, Handler: ship, DependsOn: []*retry.Budget{warehouseBudget}}
	// jsConsumer: AckPolicy explicit, AckWait 10 s, no MaxDeliver; or amqpconsumer.New(conn, "orders", cfg)
	c, err := natsconsumer.New(jsConsumer, cfg)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = c.Run(ctx) // runs the consumer's own Reconciler too: nothing else to start

	_ = err
}
