package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/exactlyonce/retry/examples/internal/opspage"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
)

// run runs every scenario: for each broker, each kind of consumer, and
// writes the table to stdout, progress to stderr.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) ([]result, error) {
	fmt.Fprintf(stderr, "%d orders per broker and consumer, %.0f%% sent twice by the publisher, %.0f%% of handler calls failing, warehouse down for %v, one instance killed mid-handler; %s store\n",
		cfg.Orders, 100*cfg.Dup, 100*cfg.Fail, cfg.Outage, cfg.Store)
	page, err := opspage.Start(stderr)
	if err != nil {
		return nil, fmt.Errorf("operator page: %w", err)
	}
	defer page.Close()
	// held drops the store of our consumer's last scenario, kept for -hold.
	held := func() {}
	defer func() { held() }()
	var results []result
	for _, mk := range brokers(cfg) {
		for _, k := range kinds(cfg) {
			b := mk()
			store, drop, err := openStore(ctx, cfg)
			if err != nil {
				return nil, err
			}
			var show *opspage.Page
			if k == kindOurs {
				show = page
			}
			r, err := runScenario(ctx, cfg, b, k, store, stderr, show)
			if k == kindOurs && cfg.Hold {
				held()
				held = drop
			} else {
				drop()
			}
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", b.name(), k, err)
			}
			fmt.Fprintf(stderr, "%-15s %-30s done in %v (killed %s, %s stopped%s)\n", r.Broker, r.Consumer,
				r.Elapsed.Round(10*time.Millisecond), r.Killed, plural(r.Frozen, "handler"), cutNote(r))
			results = append(results, r)
		}
	}
	writeTable(stdout, cfg, results)
	if cfg.Hold && cfg.holdDone != nil {
		fmt.Fprintf(stderr, "holding: the operator page %s shows our consumer's last scenario; interrupt (Ctrl-C) to end\n", page.URL)
		<-cfg.holdDone
	}
	return results, nil
}

// brokers returns the makers of the brokers to run, for one scenario each.
func brokers(cfg config) []func() broker {
	var out []func() broker
	if cfg.Broker == brokerAll || cfg.Broker == brokerNATS {
		out = append(out, func() broker { return &natsBroker{url: cfg.NATS} })
	}
	if cfg.Broker == brokerAll || cfg.Broker == brokerRabbit {
		out = append(out, func() broker { return &rabbitBroker{url: cfg.AMQP} })
	}
	return out
}

// setScenario tells b its scenario, for the simple consumers' handling.
func setScenario(b broker, s *scenario) {
	switch b := b.(type) {
	case *natsBroker:
		b.s = s
	case *rabbitBroker:
		b.s = s
	}
}

// openStore prepares a fresh, empty store for one scenario and returns a
// function that opens it for one instance, and a function that removes
// it. A MemoryStore is shared by the instances (it lives in this process,
// which outlives a killed instance); on PostgreSQL each instance gets a
// pool of its own on one schema, created with pgstore.Migrate and dropped
// afterwards.
func openStore(ctx context.Context, cfg config) (func(context.Context) (idempotency.Store, error), func(), error) {
	if cfg.Store != storePostgres {
		store := idempotency.NewMemoryStore(nil)
		return func(context.Context) (idempotency.Store, error) { return store, nil }, func() {}, nil
	}
	admin, err := pgxpool.New(ctx, cfg.DSN)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	schema := fmt.Sprintf("orders_demo_%d", time.Now().UnixNano())
	var (
		mu    sync.Mutex
		pools []*pgxpool.Pool
	)
	drop := func() {
		mu.Lock()
		for _, p := range pools {
			p.Close()
		}
		mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		admin.Close()
	}
	if err := pgstore.Migrate(ctx, admin, schema); err != nil {
		drop()
		return nil, nil, fmt.Errorf("migrate PostgreSQL schema %s: %w", schema, err)
	}
	open := func(ctx context.Context) (idempotency.Store, error) {
		pc, err := pgxpool.ParseConfig(cfg.DSN)
		if err != nil {
			return nil, err
		}
		pc.MaxConns = maxInFlight / 2
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		mu.Lock()
		pools = append(pools, pool)
		mu.Unlock()
		return pgstore.New(pool, pgstore.WithSchema(schema))
	}
	return open, drop, nil
}
