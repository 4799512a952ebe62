package idempotency_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

func TestDownstreamKey(t *testing.T) {
	t.Parallel()
	k := idempotency.DownstreamKey("alice", "order-1", "charge")
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`), k)
	assert.Equal(t, k, idempotency.DownstreamKey("alice", "order-1", "charge"), "deterministic")
	seen := map[string]bool{k: true}
	for _, other := range [][3]string{
		{"bob", "order-1", "charge"}, {"alice", "order-2", "charge"}, {"alice", "order-1", "email"},
		{"alice", "order-1charge", ""}, {"aliceorder-1", "", "charge"},
	} {
		d := idempotency.DownstreamKey(other[0], other[1], other[2])
		assert.False(t, seen[d], "collision for %v", other)
		seen[d] = true
	}
}

// downstream is a fake external service that records the keys it saw.
type downstream struct {
	mu   sync.Mutex
	keys []string
}

func (d *downstream) call(name string) func(context.Context, string) ([]byte, error) {
	return func(_ context.Context, key string) ([]byte, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.keys = append(d.keys, name+"="+key)
		return []byte(name + "-result"), nil
	}
}

func (d *downstream) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.keys...)
}

func TestStepsResumeAfterCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var svc downstream
	chargeKey := idempotency.DownstreamKey("consumer", "order-7", "charge")
	emailKey := idempotency.DownstreamKey("consumer", "order-7", "email")

	// Attempt 1 completes "charge", then stalls inside "email" (a crash,
	// as far as anyone can tell) until after its lease ran out.
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := e.runner.Do(ctx, req("order-7"), func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
			if _, err := x.Step(ctx, "charge", svc.call("charge")); err != nil {
				return nil, err
			}
			_, err := x.Step(ctx, "email", func(ctx context.Context, key string) ([]byte, error) {
				close(inside)
				<-release
				return svc.call("email-late")(ctx, key)
			})
			return nil, err
		})
		done <- err
	}()
	<-inside
	rec, err := e.store.Get(ctx, "consumer", "order-7")
	require.NoError(t, err)
	assert.Equal(t, "begin:email", rec.RecoveryPoint)

	e.clock.Add(testLease + time.Second)
	res, err := e.runner.Do(ctx, req("order-7"), func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
		require.True(t, x.Resumed())
		require.True(t, x.Started())
		charge, err := x.Step(ctx, "charge", func(context.Context, string) ([]byte, error) {
			t.Error("a completed step ran again")
			return nil, nil
		})
		if err != nil {
			return nil, err
		}
		email, err := x.Step(ctx, "email", svc.call("email"))
		if err != nil {
			return nil, err
		}
		return append(charge, email...), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "charge-resultemail-result", string(res.Response))
	assert.EqualValues(t, 2, res.Attempt)

	// The stalled attempt wakes up: its step's call happens (the downstream
	// deduplicates it by key) but its recovery point is fenced out.
	close(release)
	require.ErrorIs(t, <-done, idempotency.ErrLeaseLost)
	assert.Equal(t, []string{"charge=" + chargeKey, "email=" + emailKey, "email-late=" + emailKey}, svc.seen())
	res, err = e.runner.Do(ctx, req("order-7"), nil)
	require.NoError(t, err)
	assert.Equal(t, "charge-resultemail-result", string(res.Response))
}

func TestFailedStepResumesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var svc downstream
	errDown := errors.New("downstream unavailable")
	calls := 0
	work := func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
		if _, err := x.Step(ctx, "reserve", svc.call("reserve")); err != nil {
			return nil, err
		}
		return x.Step(ctx, "charge", func(ctx context.Context, key string) ([]byte, error) {
			calls++
			if calls == 1 {
				return nil, errDown
			}
			return svc.call("charge")(ctx, key)
		})
	}
	_, err := e.runner.Do(ctx, req("k"), work)
	require.ErrorIs(t, err, errDown)
	// The key is kept for the retry, with a lease cut short.
	e.clock.Add(time.Millisecond)
	res, err := e.runner.Do(ctx, req("k"), work)
	require.NoError(t, err)
	assert.Equal(t, "charge-result", string(res.Response))
	assert.Len(t, svc.seen(), 2, "reserve ran once, charge once successfully")
}

func TestStepMisuse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var nilExec *idempotency.Execution
	_, err := nilExec.Step(ctx, "x", nil)
	require.Error(t, err)
	nilExec.MarkStarted()
	assert.False(t, nilExec.Started())
	idempotency.MarkStarted(ctx)

	_, err = e.runner.Do(ctx, req("k"), func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
		noop := func(context.Context, string) ([]byte, error) { return nil, nil }
		if _, err := x.Step(ctx, "a", noop); err != nil {
			return nil, err
		}
		_, err := x.Step(ctx, "a", noop)
		return nil, err
	})
	require.ErrorContains(t, err, "twice")
}

func TestExtendRenewsLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	step := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := e.runner.Do(ctx, req("k"), func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
			step <- struct{}{}
			<-step
			if err := x.Extend(ctx); err != nil {
				return nil, err
			}
			step <- struct{}{}
			<-step
			return nil, x.Extend(ctx)
		})
		done <- err
	}()
	<-step
	e.clock.Add(testLease - time.Second)
	step <- struct{}{}
	<-step
	e.clock.Add(testLease - time.Second) // past the first lease, within the renewed one
	_, err := e.runner.Do(ctx, req("k"), nil)
	var inProgress *idempotency.InProgressError
	require.ErrorAs(t, err, &inProgress)
	e.clock.Add(2 * time.Second)
	_, err = e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
		return []byte("taken"), nil
	})
	require.NoError(t, err)
	step <- struct{}{}
	require.ErrorIs(t, <-done, idempotency.ErrLeaseLost)
}

// markingStore tells on marked when an execution's started mark is being
// saved, and lets the save go on.
type markingStore struct {
	*idempotency.MemoryStore
	marked chan struct{}
}

func (s *markingStore) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	if point == "started" {
		s.marked <- struct{}{}
	}
	return s.MemoryStore.SaveRecoveryPoint(ctx, f, point, data, lease)
}

// MarkStarted may be called from a goroutine the work started while the
// work runs a Step: the race detector finds no race on the execution's
// recovery state. (Step read it without the lock MarkStarted saves it
// under; this test fails under -race without the fix.)
func TestMarkStartedFromAnotherGoroutineWhileStepping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store := &markingStore{MemoryStore: e.store, marked: make(chan struct{}, 1)}
	runner := idempotency.NewRunner(store, idempotency.WithClock(e.clock), idempotency.WithLease(testLease))
	var svc downstream
	// With Request.Work the started mark is saved with the record.
	req := idempotency.Request{Caller: "consumer", Key: "order-8", Work: "order", Input: []byte("order-8")}
	res, err := runner.Do(context.Background(), req, func(ctx context.Context, ex *idempotency.Execution) ([]byte, error) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			idempotency.MarkStarted(ctx)
		}()
		<-store.marked // the mark is being saved; its execution's state is written next
		out, err := ex.Step(ctx, "charge", svc.call("charge"))
		<-done
		return out, err
	})
	require.NoError(t, err)
	assert.Equal(t, "charge-result", string(res.Response))
	assert.Equal(t, []string{"charge=" + idempotency.DownstreamKey("consumer", "order-8", "charge")}, svc.seen())
}
