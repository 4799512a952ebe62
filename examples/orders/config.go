package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// config is what the flags set.
type config struct {
	// Orders is the number of orders published to each broker.
	Orders int
	// Seed makes the injected faults repeatable.
	Seed uint64
	// Fail is the share of handler calls that fail transiently.
	Fail float64
	// Dup is the share of orders the publisher sends twice.
	Dup float64
	// Outage is how long the warehouse is down.
	Outage time.Duration
	// Store is our consumers' idempotency store: "memory" or "postgres".
	Store string
	// DSN is the PostgreSQL connection string, for -store=postgres.
	DSN string
	// Broker is "all", "nats" or "rabbitmq".
	Broker string
	// Hold keeps the demo running once the table is written, with the
	// last scenario of our consumer, its store and the operator page,
	// until holdDone.
	Hold bool
	// holdDone ends a hold (an interrupt); nil holds nothing.
	holdDone <-chan struct{}
	// NATS and AMQP are the brokers' URLs.
	NATS, AMQP string
	// Cut has our consumers reach their broker through a proxy that drops
	// every connection a few times mid-run (see cutter).
	Cut bool
	// OTel is "stdout" to export our consumers' metrics, or "".
	OTel string
	// telemetry records our consumers' metrics when OTel is set.
	telemetry *telemetry
}

// Limits and names of the flags.
const (
	shortOrders   = 1000
	maxOrders     = 100_000
	storeMemory   = "memory"
	storePostgres = "postgres"
	brokerAll     = "all"
	brokerNATS    = "nats"
	brokerRabbit  = "rabbitmq"
)

// defaultDSN is the PostgreSQL server the demo uses unless
// EXACTLYONCE_PG_DSN or -dsn says otherwise.
const defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func defaultConfig() config {
	return config{
		Orders: 10_000, Seed: 1, Fail: 0.05, Dup: 0.03, Outage: 3 * time.Second,
		Store: storeMemory, DSN: env("EXACTLYONCE_PG_DSN", defaultDSN), Broker: brokerAll,
		NATS: env("EXACTLYONCE_NATS_URL", "nats://127.0.0.1:4222"),
		AMQP: env("EXACTLYONCE_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
	}
}

// env returns the environment variable name, or def.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parseFlags reads the command line. On a bad flag it writes the error and
// the usage to stderr and returns the error; -h returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: orders [flags]")
		fmt.Fprintln(fs.Output(), "Ships orders from NATS JetStream and RabbitMQ with three kinds of consumer and counts duplicates, lost and dead-lettered orders.")
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Orders, "n", cfg.Orders, "orders per broker")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the injected faults")
	fs.Float64Var(&cfg.Fail, "fail", cfg.Fail, "share of handler calls that fail transiently")
	fs.Float64Var(&cfg.Dup, "dup", cfg.Dup, "share of orders the publisher sends twice (a retry after a lost ack)")
	fs.DurationVar(&cfg.Outage, "outage", cfg.Outage, "how long the warehouse is down, once 60% of the orders shipped")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "our consumers' idempotency store: memory or postgres")
	fs.StringVar(&cfg.DSN, "dsn", cfg.DSN, "PostgreSQL connection string for -store=postgres (default from EXACTLYONCE_PG_DSN)")
	fs.StringVar(&cfg.Broker, "broker", cfg.Broker, "brokers to run: all, nats or rabbitmq")
	fs.BoolVar(&cfg.Cut, "cut", cfg.Cut, fmt.Sprintf("run our consumers only, reaching their broker through a proxy that drops every connection %d times mid-run", cutsPerRun))
	fs.StringVar(&cfg.OTel, "otel", cfg.OTel, "OpenTelemetry: stdout exports our consumers' metrics with the stdout exporter, as JSON on stderr once the run ends, so that the table stays alone on stdout (default: none)")
	fs.BoolVar(&cfg.Hold, "hold", cfg.Hold, "keep running once the table is written, with our consumer's last scenario and the operator page, until interrupted")
	short := fs.Bool("short", false, fmt.Sprintf("a quick run: %d orders unless -n is given", shortOrders))
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, usageError(fs, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	nSet := false
	fs.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
	if *short && !nSet {
		cfg.Orders = shortOrders
	}
	if err := cfg.validate(); err != nil {
		return config{}, usageError(fs, err)
	}
	return cfg, nil
}

// validate checks the ranges of the settings.
func (c config) validate() error {
	switch {
	case c.Orders < 10 || c.Orders > maxOrders:
		return fmt.Errorf("-n must be between 10 and %d, got %d", maxOrders, c.Orders)
	case !(c.Fail >= 0 && c.Fail <= 0.5):
		return fmt.Errorf("-fail must be in [0, 0.5], got %v", c.Fail)
	case !(c.Dup >= 0 && c.Dup <= 0.5):
		return fmt.Errorf("-dup must be in [0, 0.5], got %v", c.Dup)
	case c.Outage < 0 || c.Outage > time.Minute:
		return fmt.Errorf("-outage must be between 0 and 1m, got %v", c.Outage)
	case c.Store != storeMemory && c.Store != storePostgres:
		return fmt.Errorf("-store must be %s or %s, got %q", storeMemory, storePostgres, c.Store)
	case c.Broker != brokerAll && c.Broker != brokerNATS && c.Broker != brokerRabbit:
		return fmt.Errorf("-broker must be %s, %s or %s, got %q", brokerAll, brokerNATS, brokerRabbit, c.Broker)
	case c.OTel != "" && c.OTel != otelStdout:
		return fmt.Errorf("-otel must be %s or empty, got %q", otelStdout, c.OTel)
	}
	return nil
}

// usageError reports err with the usage and returns it.
func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintln(fs.Output(), "orders:", err)
	fs.Usage()
	return err
}
