package consumer_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// countingStore is a MemoryBatchStore that counts the claims and commits
// made of it. Its first ClaimBatch tells started and waits for fetched,
// so that the deliveries taken meanwhile form the next batch.
type countingStore struct {
	*idempotency.MemoryBatchStore
	single atomic.Int64 // claims made alone

	mu      sync.Mutex
	claims  [][]string // the keys of each ClaimBatch
	commits []int      // the outcomes each Commit stored
	started chan struct{}
	fetched chan struct{}
}

func newCountingStore() *countingStore {
	return &countingStore{MemoryBatchStore: idempotency.NewMemoryBatchStore(nil),
		started: make(chan struct{}), fetched: make(chan struct{})}
}

func (s *countingStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	s.single.Add(1)
	return s.MemoryBatchStore.Claim(ctx, req)
}

func (s *countingStore) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	s.mu.Lock()
	first := len(s.claims) == 0
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	s.claims = append(s.claims, keys)
	s.mu.Unlock()
	if first {
		close(s.started)
		<-s.fetched
	}
	return s.MemoryBatchStore.ClaimBatch(ctx, reqs)
}

func (s *countingStore) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	tx, err := s.MemoryBatchStore.BeginBatch(ctx)
	return &countingBatch{BatchTx: tx, s: s}, err
}

func (s *countingStore) batches() ([][]string, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.claims), slices.Clone(s.commits)
}

type countingBatch struct {
	idempotency.BatchTx
	s *countingStore
}

func (b *countingBatch) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	res, err := b.BatchTx.Commit(ctx)
	stored := 0
	for _, r := range res {
		if r.Err == nil {
			stored++
		}
	}
	if len(res) > 0 {
		b.s.mu.Lock()
		b.s.commits = append(b.s.commits, stored)
		b.s.mu.Unlock()
	}
	return res, err
}

// splitSource hands out its first delivery, waits until the store claims
// it, then hands out the rest in the same fetch: they form one batch.
type splitSource struct {
	s    *countingStore
	ds   []*delivery
	once sync.Once
}

func (src *splitSource) Fetch(ctx context.Context, n int, deliver func(consumer.Delivery)) error {
	took := false
	src.once.Do(func() {
		took = true
		deliver(src.ds[0])
		<-src.s.started
		for _, d := range src.ds[1:] {
			deliver(d)
		}
		close(src.s.fetched)
	})
	if !took {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// ackedAfterCommit makes each delivery check, when acked, that its outcome
// is stored.
func ackedAfterCommit(t *testing.T, st idempotency.Store, ds []*delivery) {
	for _, d := range ds {
		d.onAck = func() {
			rec, err := st.Get(context.Background(), "ship", d.msg.Key)
			if err != nil || rec.State != idempotency.StateCompleted {
				t.Errorf("%s acked before its outcome was stored: %v %v", d.msg.Key, rec.State, err)
			}
		}
	}
}

func deliveries(keys ...string) []*delivery {
	ds := make([]*delivery, len(keys))
	for i, k := range keys {
		ds[i] = newDelivery(k, 1, false)
	}
	return ds
}

// The deliveries taken while a claim is on its way are claimed in one
// operation and committed in one; each is acked after the commit.
func TestBatchClaimsAndCommitsTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newCountingStore()
		var ran atomic.Int64
		c := newConsumer(t, idempotency.NewRunner(st), func(context.Context, *consumer.Message) error {
			ran.Add(1)
			return nil
		})
		ds := deliveries("m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7")
		ackedAfterCommit(t, st, ds)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx, &splitSource{s: st, ds: ds}) }()
		for _, d := range ds {
			<-d.done
			assert.Equal(t, "ack", state(d), d.msg.Key)
		}
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)

		claims, commits := st.batches()
		assert.Equal(t, [][]string{{"m0"}, {"m1", "m2", "m3", "m4", "m5", "m6", "m7"}}, claims)
		slices.Sort(commits)
		assert.Equal(t, []int{1, 7}, commits, "outcomes stored by each commit")
		assert.Zero(t, st.single.Load(), "claims made alone")
		assert.EqualValues(t, 8, ran.Load())
		assert.EqualValues(t, 8, c.Stats().Executed)
	})
}

// A message alone is claimed, run and committed at once: its batch does
// not wait for a timer (no time passes).
func TestBatchAloneWaitsForNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := idempotency.NewMemoryBatchStore(nil)
		c := newConsumer(t, idempotency.NewRunner(st), func(context.Context, *consumer.Message) error { return nil })
		d := newDelivery("m0", 1, false)
		ackedAfterCommit(t, st, []*delivery{d})
		start := time.Now()
		run(t, c, d)
		assert.Equal(t, "ack", state(d))
		assert.Zero(t, time.Since(start), "time the message waited")
	})
}

// The outcomes of a batch wait at most Config.BatchWait for a slow
// handler of the batch: the others are committed and acked without it.
func TestBatchWaitBoundsASlowHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newCountingStore()
		slow := make(chan struct{})
		c := newConsumer(t, idempotency.NewRunner(st), func(_ context.Context, m *consumer.Message) error {
			if m.Key == "m3" {
				<-slow
			}
			return nil
		})
		ds := deliveries("m0", "m1", "m2", "m3")
		ackedAfterCommit(t, st, ds)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx, &splitSource{s: st, ds: ds}) }()
		synctest.Wait()
		for _, d := range ds[1:3] {
			assert.Empty(t, state(d), "%s settled before BatchWait", d.msg.Key)
		}
		time.Sleep(consumer.DefaultBatchWait)
		synctest.Wait()
		for _, d := range ds[:3] {
			assert.Equal(t, "ack", state(d), d.msg.Key)
		}
		assert.Empty(t, state(ds[3]), "the slow message")
		close(slow)
		<-ds[3].done
		assert.Equal(t, "ack", state(ds[3]))
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		_, commits := st.batches()
		slices.Sort(commits)
		assert.Equal(t, []int{1, 1, 2}, commits, "outcomes stored by each commit")
	})
}

// A handler that fails in a batch gives back only its own message; the
// others of the batch are committed and acked.
func TestBatchOneFailureIsItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newCountingStore()
		c := newConsumer(t, idempotency.NewRunner(st), func(_ context.Context, m *consumer.Message) error {
			if m.Key == "m2" {
				return errors.New("the warehouse answered 503")
			}
			return nil
		})
		ds := deliveries("m0", "m1", "m2", "m3")
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx, &splitSource{s: st, ds: ds}) }()
		for _, d := range ds {
			<-d.done
		}
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		for _, d := range ds {
			want := "ack"
			if d.msg.Key == "m2" {
				want = "nak"
			}
			assert.Equal(t, want, state(d), d.msg.Key)
		}
		_, err := st.Get(context.Background(), "ship", "m2")
		assert.ErrorIs(t, err, idempotency.ErrNotFound, "the failed message's key is freed for its redelivery")
		_, commits := st.batches()
		slices.Sort(commits)
		assert.Equal(t, []int{1, 2}, commits)
	})
}

// A redelivery of messages whose batch was committed (the acks lost) is
// replayed from the store, in a batch, and never runs again.
func TestBatchReplaysCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := idempotency.NewMemoryBatchStore(nil)
		var ran atomic.Int64
		c := newConsumer(t, idempotency.NewRunner(st), func(context.Context, *consumer.Message) error {
			ran.Add(1)
			return nil
		})
		run(t, c, deliveries("m0", "m1", "m2")...)
		again := []*delivery{newDelivery("m0", 2, false), newDelivery("m1", 2, false), newDelivery("m2", 2, true)}
		run(t, c, again...)
		for _, d := range again {
			assert.Equal(t, "ack", state(d), d.msg.Key)
		}
		assert.EqualValues(t, 3, ran.Load())
		assert.EqualValues(t, 3, c.Stats().Duplicates)
	})
}

// state is how d was settled so far ("" while it is not).
func state(d *delivery) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settled
}
