package linearize

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func memoryHarness(*testing.T) storetest.Harness {
	return onMockClock(func(c clock.Clock) idempotency.Store { return idempotency.NewMemoryStore(c) })
}

// onMockClock is a Harness of the store newStore makes on a mock clock.
func onMockClock(newStore func(clock.Clock) idempotency.Store) storetest.Harness {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return storetest.Harness{Store: newStore(mock), Advance: mock.Add}
}

func TestMemoryStoreIsLinearizable(t *testing.T) {
	t.Parallel()
	Run(t, memoryHarness)
}

// unfencedComplete completes whatever record holds the key, as Redis and
// MySQL idempotency layers that complete "by key" do: a paused owner's late
// completion overwrites the execution that took over.
type unfencedComplete struct{ idempotency.Store }

func (s unfencedComplete) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	r, err := s.Get(ctx, f.Caller, f.Key)
	if err != nil {
		return idempotency.ErrLeaseLost
	}
	return s.Store.Complete(ctx, r.Fence(), response)
}

// unfencedRecoveryPoint saves a recovery point into whatever record holds
// the key, ignoring the generation: a stale owner writes into a later
// record of its key.
type unfencedRecoveryPoint struct{ idempotency.Store }

func (s unfencedRecoveryPoint) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	r, err := s.Get(ctx, f.Caller, f.Key)
	if err != nil || r.Attempt != f.Attempt {
		return idempotency.ErrLeaseLost
	}
	return s.Store.SaveRecoveryPoint(ctx, r.Fence(), point, data, lease)
}

// The checker catches stores that do not fence, and writes the history out
// where a person can read it.
func TestBrokenStoresAreCaught(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(idempotency.Store) idempotency.Store{
		"unfenced Complete":               func(s idempotency.Store) idempotency.Store { return unfencedComplete{s} },
		"generation-blind recovery point": func(s idempotency.Store) idempotency.Store { return unfencedRecoveryPoint{s} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			expectCaught(t, func(t *testing.T) storetest.Harness {
				h := memoryHarness(t)
				h.Store = wrap(h.Store)
				return h
			})
		})
	}
}

// expectCaught checks that the checker finds the store that newHarness
// builds not linearizable, and writes the history out where a person can
// read it.
func expectCaught(t *testing.T, newHarness func(*testing.T) storetest.Harness) {
	t.Helper()
	// The interleaving is the scheduler's: a few seeds, so that a run whose
	// calls happened never to meet the bug cannot pass for a miss of the
	// checker.
	for seed := uint64(1); seed <= 5; seed++ {
		h := newHarness(t)
		dir := filepath.Join(t.TempDir(), "report")
		res := check(t.Context(), Config{Seed: seed, Dir: dir}.withDefaults(), h)
		if res.err == nil {
			continue
		}
		if !strings.Contains(res.err.Error(), "is not linearizable") {
			t.Fatalf("seed %d: the check failed otherwise: %v", seed, res.err)
		}
		text, err := os.ReadFile(filepath.Join(dir, "history.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "not linearizable") || !strings.Contains(string(text), "longest linearization") {
			t.Fatalf("history.txt does not say what failed:\n%s", text)
		}
		if html, err := os.Stat(filepath.Join(dir, "history.html")); err != nil || html.Size() == 0 {
			t.Fatalf("no visualization: %v", err)
		}
		if !strings.Contains(res.err.Error(), dir) {
			t.Fatalf("the failure does not name where the history is: %v", res.err)
		}
		return
	}
	t.Fatal("the checker accepted the histories of a broken store, five seeds running")
}
