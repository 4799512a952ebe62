package linearize

import (
	"context"
	"sync"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

func memoryBatchHarness(*testing.T) storetest.Harness {
	return onMockClock(func(c clock.Clock) idempotency.Store { return idempotency.NewMemoryBatchStore(c) })
}

func TestMemoryBatchStoreIsLinearizable(t *testing.T) {
	t.Parallel()
	Run(t, memoryBatchHarness)
}

// On a BatchStore the workload makes batches of claims, a key twice in
// some, and batches of completions whose members are stored or find their
// fence lost, among single calls on the same keys.
func TestWorkloadMakesBatches(t *testing.T) {
	t.Parallel()
	ops, errs := record(t.Context(), Config{Seed: 7}.withDefaults(), memoryBatchHarness(t))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var singles, claims, twice, stored, lost int
	perBatch := make(map[string]map[int]bool)
	for _, op := range ops {
		in, out := op.Input.(input), op.Output.(output)
		switch {
		case in.Batch == "":
			singles++
		case in.Kind == opClaim:
			claims++
			if perBatch[in.Batch] == nil {
				perBatch[in.Batch] = make(map[int]bool)
			}
			if perBatch[in.Batch][in.Key] {
				twice++
			}
			perBatch[in.Batch][in.Key] = true
		case in.Kind == opComplete && out.Err == "":
			stored++
		case in.Kind == opComplete && out.Err == errLeaseLost:
			lost++
		default:
			t.Fatalf("a batch member of another kind: %s", checker{keys: keys}.describe(in, out))
		}
	}
	t.Logf("%d single calls; batch members: %d claims (%d on a key already in their batch), %d completions stored, %d lost their fence",
		singles, claims, twice, stored, lost)
	if singles == 0 || claims == 0 || twice == 0 || stored == 0 || lost == 0 {
		t.Fatal("the workload missed a kind of call")
	}
}

// doubleCreate is a BatchStore whose ClaimBatch answers a key asked for
// twice in a batch from one claim: both members are told they created
// the record, and run its execution at once.
type doubleCreate struct{ *idempotency.MemoryBatchStore }

func (s doubleCreate) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	claims := make([]idempotency.Claim, len(reqs))
	first := make(map[[2]string]int)
	for i, req := range reqs {
		if j, ok := first[[2]string{req.Caller, req.Key}]; ok {
			claims[i] = claims[j]
			continue
		}
		first[[2]string{req.Caller, req.Key}] = i
		c, err := s.Claim(ctx, req)
		if err != nil {
			return nil, err
		}
		claims[i] = c
	}
	return claims, nil
}

// unfencedBatch is a BatchStore whose batches complete whatever record
// holds the key, as if the fence were its current one.
type unfencedBatch struct{ *idempotency.MemoryBatchStore }

func (s unfencedBatch) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	bt, err := s.MemoryBatchStore.BeginBatch(ctx)
	return &unfencedBatchTx{BatchTx: bt, s: s.MemoryBatchStore, given: make(map[idempotency.Fence][]idempotency.Fence)}, err
}

type unfencedBatchTx struct {
	idempotency.BatchTx
	s     *idempotency.MemoryBatchStore
	mu    sync.Mutex
	given map[idempotency.Fence][]idempotency.Fence // the record's fence -> the members', in order
}

func (b *unfencedBatchTx) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	used := f
	if r, err := b.s.Get(ctx, f.Caller, f.Key); err == nil {
		used = r.Fence()
	}
	b.mu.Lock()
	b.given[used] = append(b.given[used], f)
	b.mu.Unlock()
	return b.BatchTx.Begin(ctx, used)
}

func (b *unfencedBatchTx) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	results, err := b.BatchTx.Commit(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, r := range results {
		if given := b.given[r.Fence]; len(given) > 0 {
			results[i].Fence, b.given[r.Fence] = given[0], given[1:]
		}
	}
	return results, err
}

// The checker catches a BatchStore whose batches break what their members
// promise alone.
func TestBrokenBatchStoresAreCaught(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(*idempotency.MemoryBatchStore) idempotency.Store{
		"ClaimBatch creating a key twice": func(s *idempotency.MemoryBatchStore) idempotency.Store { return doubleCreate{s} },
		"unfenced batch Complete":         func(s *idempotency.MemoryBatchStore) idempotency.Store { return unfencedBatch{s} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			expectCaught(t, func(t *testing.T) storetest.Harness {
				h := memoryBatchHarness(t)
				h.Store = wrap(h.Store.(*idempotency.MemoryBatchStore))
				return h
			})
		})
	}
}
