package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// config is what the flags set.
type config struct {
	// Charges is the number of logical charges each client sends.
	Charges int
	// Seed makes the injected faults repeatable.
	Seed uint64
	// Drop is the share of attempts whose response the proxy drops after the
	// service has processed the request.
	Drop float64
	// Reset is the share of attempts whose connection the proxy resets
	// before forwarding the request.
	Reset float64
	// Latency is the most latency the proxy adds to an attempt (uniform from 0).
	Latency time.Duration
	// Concurrency is the number of charges in flight at once.
	Concurrency int
	// Store is the idempotency store: "memory", "postgres", "redis" or "mysql".
	Store string
	// DSN is the PostgreSQL connection string, for -store=postgres.
	DSN string
	// RedisAddr is the Redis server's address, for -store=redis.
	RedisAddr string
	// MySQLDSN is the MySQL or MariaDB data source name, for -store=mysql.
	MySQLDSN string
	// OTel is "stdout" to export traces and metrics with OpenTelemetry's
	// stdout exporters, "" for none.
	OTel string
	// Crash kills the payment service once per client, about a third of
	// the way through the charges, between a charge and its completion,
	// and restarts it on the same store, where a Reconciler and the
	// clients' retries finish what it left.
	Crash bool
	// Hold keeps the demo running once the table is written, with the
	// keyed client's service, store and operator page, until holdDone.
	Hold bool
	// holdDone ends a hold (an interrupt); nil holds nothing.
	holdDone <-chan struct{}
}

// Limits of the flags.
const (
	shortCharges   = 100
	maxCharges     = 100_000
	maxConcurrency = 256
	maxLatency     = time.Second
)

// defaultConfig is the configuration without flags.
func defaultConfig() config {
	return config{
		Charges:     1000,
		Seed:        1,
		Drop:        0.03,
		Reset:       0.03,
		Latency:     2 * time.Millisecond,
		Concurrency: 16,
		Store:       storeMemory,
		DSN:         envDSN(),
		RedisAddr:   envRedisAddr(),
		MySQLDSN:    envMySQLDSN(),
	}
}

// parseFlags reads the command line. On a bad flag it writes the error and the
// usage to stderr and returns the error; -h returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: payments [flags]")
		fmt.Fprintln(fs.Output(), "Charges a payment service behind a faulty proxy with two clients and counts duplicates.")
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Charges, "n", cfg.Charges, "number of charges per client")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the injected faults")
	fs.Float64Var(&cfg.Drop, "drop", cfg.Drop, "share of attempts whose response is dropped after the service processed them")
	fs.Float64Var(&cfg.Reset, "reset", cfg.Reset, "share of attempts whose connection is reset before they reach the service")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, "most latency added to an attempt")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "charges in flight at once")
	fs.StringVar(&cfg.Store, "store", cfg.Store, "idempotency store: memory, postgres, redis or mysql")
	fs.StringVar(&cfg.DSN, "dsn", cfg.DSN, "PostgreSQL connection string for -store=postgres (default from EXACTLYONCE_PG_DSN)")
	fs.StringVar(&cfg.RedisAddr, "redis", cfg.RedisAddr, "Redis address for -store=redis (default from EXACTLYONCE_REDIS_ADDR)")
	fs.StringVar(&cfg.MySQLDSN, "mysql", cfg.MySQLDSN, "MySQL or MariaDB data source name for -store=mysql (default from EXACTLYONCE_MYSQL_DSN)")
	fs.StringVar(&cfg.OTel, "otel", cfg.OTel, "OpenTelemetry: stdout exports traces (1% sampled) and metrics with the stdout exporters, as JSON on stderr so that the table stays alone on stdout (default: none)")
	fs.BoolVar(&cfg.Crash, "crash", cfg.Crash, "kill the payment service once per client, a third of the way through, between a charge and its completion, and restart it on the same store, where a Reconciler finishes what it left")
	fs.BoolVar(&cfg.Hold, "hold", cfg.Hold, "keep running once the table is written, with the keyed client's service and the operator page, until interrupted")
	short := fs.Bool("short", false, fmt.Sprintf("a quick run: %d charges unless -n is given", shortCharges))
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, usageError(fs, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if *short && !isSet(fs, "n") {
		cfg.Charges = shortCharges
	}
	if err := cfg.validate(); err != nil {
		return config{}, usageError(fs, err)
	}
	return cfg, nil
}

// validate checks the ranges of the settings.
func (c config) validate() error {
	switch {
	case c.Charges < 1 || c.Charges > maxCharges:
		return fmt.Errorf("-n must be between 1 and %d, got %d", maxCharges, c.Charges)
	case !(c.Drop >= 0 && c.Drop < 1):
		return fmt.Errorf("-drop must be in [0, 1), got %v", c.Drop)
	case !(c.Reset >= 0 && c.Reset < 1):
		return fmt.Errorf("-reset must be in [0, 1), got %v", c.Reset)
	case c.Drop+c.Reset > 0.5:
		return errors.New("-drop plus -reset must be at most 0.5 (above that the demo measures only the outage)")
	case c.Latency < 0 || c.Latency > maxLatency:
		return fmt.Errorf("-latency must be between 0 and %v, got %v", maxLatency, c.Latency)
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return fmt.Errorf("-concurrency must be between 1 and %d, got %d", maxConcurrency, c.Concurrency)
	case c.Store != storeMemory && c.Store != storePostgres && c.Store != storeRedis && c.Store != storeMySQL:
		return fmt.Errorf("-store must be %s, %s, %s or %s, got %q", storeMemory, storePostgres, storeRedis, storeMySQL, c.Store)
	case c.OTel != "" && c.OTel != otelStdout:
		return fmt.Errorf("-otel must be %s or empty, got %q", otelStdout, c.OTel)
	}
	return nil
}

// usageError reports err with the usage and returns it.
func usageError(fs *flag.FlagSet, err error) error {
	fmt.Fprintln(fs.Output(), "payments:", err)
	fs.Usage()
	return err
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
