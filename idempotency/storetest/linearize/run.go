package linearize

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

// Config sizes a run. The zero value of a field means its default.
type Config struct {
	// Clients is how many goroutines call the store at once (default 8).
	Clients int
	// Epochs is how many times the clients run between moves of the clock
	// (default 20).
	Epochs int
	// OpsPerEpoch is how many calls each client makes in an epoch
	// (default 6).
	OpsPerEpoch int
	// Seed makes the clients' choices and the clock's moves repeatable
	// (the interleaving of the calls is not). Default: a new one per run,
	// reported on failure.
	Seed uint64
	// Dir is where a failing history is written (default: a new directory
	// under os.TempDir(), kept after the test so that a person can read it).
	Dir string
	// CheckTimeout bounds the checker (default two minutes); a check that
	// runs out of time fails.
	CheckTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Clients <= 0 {
		c.Clients = 8
	}
	if c.Epochs <= 0 {
		c.Epochs = 20
	}
	if c.OpsPerEpoch <= 0 {
		c.OpsPerEpoch = 6
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = 2 * time.Minute
	}
	return c
}

// Run checks that the store newHarness builds is linearizable: many clients
// call it at once (claims, recovery points, completions, releases, parks,
// reads, takeovers of stalled executions, lists of parked ones, sweeps, and
// on a BatchStore batches of claims and of completions) on a few keys, with
// fences fresh and stale, some clients sitting out whole epochs past their
// leases while the clock moves between epochs, and the history of calls and
// results is checked with porcupine against a sequential model of one
// record. A history that is not linearizable fails the test, with the path
// of a text log and porcupine's HTML visualization of it.
func Run(t *testing.T, newHarness func(t *testing.T) storetest.Harness) {
	t.Helper()
	RunConfig(t, newHarness, Config{})
}

// RunConfig is Run with a Config.
func RunConfig(t *testing.T, newHarness func(t *testing.T) storetest.Harness, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults()
	h := newHarness(t)
	if h.Store == nil || h.Advance == nil {
		t.Fatal("linearize: Harness needs Store and Advance")
	}
	res := check(t.Context(), cfg, h)
	if res.err != nil {
		t.Fatalf("linearize (seed %d): %v", cfg.Seed, res.err)
	}
	t.Logf("linearize (seed %d): %d calls recorded, linearizable", cfg.Seed, res.calls)
}

// result is the outcome of one check.
type result struct {
	calls int
	// err says why the run failed: a store error, or a history that is not
	// linearizable (written out to files, their paths in the message).
	err error
	// files are the files written for a history that failed.
	files []string
}

// check runs the workload on h and checks its history.
func check(ctx context.Context, cfg Config, h storetest.Harness) result {
	ops, errs := record(ctx, cfg, h)
	if err := errors.Join(errs...); err != nil {
		return result{calls: len(ops), err: fmt.Errorf("the store failed calls it should have answered: %w", err)}
	}
	c := checker{keys: keys, tolerance: tolerance.Microseconds()}
	model := c.model()
	verdict, info := porcupine.CheckOperationsVerbose(model, ops, cfg.CheckTimeout)
	if verdict == porcupine.Ok {
		return result{calls: len(ops)}
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "exactlyonce-linearizability-")
		if err != nil {
			return result{calls: len(ops), err: fmt.Errorf("history not linearizable (%v), and no directory to write it: %w", verdict, err)}
		}
		dir = d
	}
	files, werr := writeReport(dir, c, model, ops, info, verdict, cfg)
	what := "is not linearizable"
	if verdict == porcupine.Unknown {
		what = fmt.Sprintf("could not be checked within %v", cfg.CheckTimeout)
	}
	err := fmt.Errorf("the history of %d calls %s; read %v", len(ops), what, files)
	if werr != nil {
		err = errors.Join(err, fmt.Errorf("writing it out: %w", werr))
	}
	return result{calls: len(ops), err: err, files: files}
}
