package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sink records deliveries by message id.
type sink struct {
	mu    sync.Mutex
	got   map[string]int // deliveries per message id
	order []string
}

func newSink() *sink { return &sink{got: map[string]int{}} }

func (k *sink) deliver(_ context.Context, m pgstore.OutboxMessage) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got[m.ID]++
	k.order = append(k.order, m.ID)
	return nil
}

func (k *sink) count(id string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.got[id]
}

// enqueue writes n messages, each in its own transaction, and returns their ids.
func enqueue(t *testing.T, s *pgstore.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range n {
		tx, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		ids[i], err = s.Enqueue(ctx, tx, "topic", fmt.Appendf(nil, "m%d", i))
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	return ids
}

func pending(t *testing.T, s *pgstore.Store, schema string) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM "+table(schema, "outbox")+" WHERE delivered_at IS NULL").Scan(&n))
	return n
}

func TestEnqueueOnlyOnCommit(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, tx, "t", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	assert.Zero(t, outboxCount(t, s, schema))

	k := newSink()
	r := &pgstore.Relay{Store: s, Deliver: k.deliver}
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestRelayDeliversInOrderWithStableIDs(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	ids := enqueue(t, s, 7)
	k := newSink()
	var payloads []string
	r := &pgstore.Relay{Store: s, Batch: 3, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		payloads = append(payloads, string(m.Payload))
		assert.Equal(t, "topic", m.Topic)
		return k.deliver(ctx, m)
	}}
	total := 0
	for {
		n, err := r.RunOnce(ctx)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		total += n
	}
	assert.Equal(t, 7, total)
	assert.Equal(t, ids, k.order)
	assert.Equal(t, []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6"}, payloads)
	assert.Zero(t, pending(t, s, schema))
}

// A delivery that fails stops the batch: the messages delivered before it are
// marked, the failed one and the rest stay for the next run, with the same ids.
func TestRelayFailureMidBatch(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	ids := enqueue(t, s, 5)
	k := newSink()
	boom := errors.New("downstream unavailable")
	r := &pgstore.Relay{Store: s, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		if m.ID == ids[2] {
			return boom
		}
		return k.deliver(ctx, m)
	}}
	n, err := r.RunOnce(ctx)
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 2, n)
	assert.Equal(t, 3, pending(t, s, schema))

	var failures int
	var lastErr string
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT failures, last_error FROM "+table(schema, "outbox")+
		" WHERE id = $1", ids[2]).Scan(&failures, &lastErr))
	assert.Equal(t, 1, failures)
	assert.Contains(t, lastErr, "downstream unavailable")

	// A new relay delivers the rest; the failed message carries its failure count.
	var sawFailures int
	r2 := &pgstore.Relay{Store: s, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		if m.ID == ids[2] {
			sawFailures = m.Failures
		}
		return k.deliver(ctx, m)
	}}
	n, err = r2.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, 1, sawFailures)
	assert.Equal(t, ids, k.order)
	assert.Zero(t, pending(t, s, schema))
}

// A delivery function that panics mid-batch: the transaction rolls back, so
// the whole batch is delivered again (at least once), with the same ids.
func TestRelayPanicMidBatchLosesNothing(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	ids := enqueue(t, s, 4)
	k := newSink()
	r := &pgstore.Relay{Store: s, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		if m.ID == ids[2] {
			panic("relay crashed")
		}
		return k.deliver(ctx, m)
	}}
	func() {
		defer func() { assert.Equal(t, "relay crashed", recover()) }()
		_, _ = r.RunOnce(ctx)
	}()
	assert.Equal(t, 4, pending(t, s, schema))

	r2 := &pgstore.Relay{Store: s, Deliver: k.deliver}
	n, err := r2.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	for i, id := range ids {
		want := 1
		if i < 2 {
			want = 2 // delivered before the crash, and again after
		}
		assert.Equal(t, want, k.count(id), "message %d", i)
	}
	assert.Zero(t, pending(t, s, schema))
}

// The context ends after part of a batch: what was delivered is recorded, the
// rest is left for a new relay.
func TestRelayCancelledMidBatch(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ids := enqueue(t, s, 5)
	k := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &pgstore.Relay{Store: s, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		err := k.deliver(ctx, m)
		if m.ID == ids[1] {
			cancel()
		}
		return err
	}}
	n, err := r.RunOnce(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 2, n)
	assert.Equal(t, 3, pending(t, s, schema))

	r2 := &pgstore.Relay{Store: s, Deliver: k.deliver}
	n, err = r2.RunOnce(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, ids, k.order)
}

// Several relays at once never hold the same message, and together deliver
// everything exactly once when nothing fails.
func TestRelaysConcurrent(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ids := enqueue(t, s, 120)
	k := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		r := &pgstore.Relay{Store: s, Batch: 7, Deliver: k.deliver, Interval: 1}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	// Wait for the real condition: every message delivered, with a bound.
	waitFor(t, func() bool { return pending(t, s, schema) == 0 })
	cancel()
	wg.Wait()
	for _, id := range ids {
		assert.Equal(t, 1, k.count(id), "message %s", id)
	}
}

// A consumer that runs each message through the idempotency core API with
// key = message id does its work once per message, though the relay
// delivered some messages twice.
func TestRelayConsumerRunsEachMessageOnce(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	ids := enqueue(t, s, 6)
	consumer := idempotency.NewRunner(s) // the consumer's keys live in the same database here
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	consume := func(crashAt string) pgstore.DeliverFunc {
		return func(ctx context.Context, m pgstore.OutboxMessage) error {
			if m.ID == crashAt {
				panic("relay crashed")
			}
			_, err := consumer.Do(ctx, idempotency.Request{Caller: "mailer", Key: m.ID, Fingerprint: m.Topic},
				func(context.Context, *idempotency.Execution) ([]byte, error) {
					mu.Lock()
					runs[m.ID]++
					mu.Unlock()
					return []byte("sent"), nil
				})
			return err
		}
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = (&pgstore.Relay{Store: s, Deliver: consume(ids[4])}).RunOnce(ctx)
	}()
	n, err := (&pgstore.Relay{Store: s, Deliver: consume("")}).RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	for _, id := range ids {
		assert.Equal(t, 1, runs[id], "message %s", id)
	}
}

// With MaxFailures a poison message is parked after that many failures and
// no longer holds back the messages after it; un-parking delivers it again.
func TestRelayParksPoisonMessage(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	ids := enqueue(t, s, 3)
	k := newSink()
	poison := errors.New("cannot decode")
	r := &pgstore.Relay{Store: s, MaxFailures: 2, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		if m.ID == ids[1] {
			return poison
		}
		return k.deliver(ctx, m)
	}}
	n, err := r.RunOnce(ctx) // delivers ids[0], fails ids[1] once, stops
	require.ErrorIs(t, err, poison)
	assert.Equal(t, 1, n)
	assert.Zero(t, k.count(ids[2]))
	n, err = r.RunOnce(ctx) // fails ids[1] a second time: parked, ids[2] goes on
	require.ErrorIs(t, err, poison)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, k.count(ids[2]))
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the parked message is skipped")

	_, err = s.Pool().Exec(ctx, "UPDATE "+table(schema, "outbox")+" SET parked_at = NULL WHERE id = $1", ids[1])
	require.NoError(t, err)
	n, err = (&pgstore.Relay{Store: s, Deliver: k.deliver}).RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{ids[0], ids[2], ids[1]}, k.order)
	assert.Zero(t, pending(t, s, schema))
}

// A delivery error whose text the database cannot store as text (a NUL
// byte, invalid UTF-8, as a receiver's raw answer may hold) is still
// recorded, so the message is counted and parked like any other failure
// instead of holding back the outbox forever.
func TestRelayRecordsAnyErrorText(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	ids := enqueue(t, s, 2)
	k := newSink()
	poison := errors.New("receiver said \x00\xff\xfe")
	r := &pgstore.Relay{Store: s, MaxFailures: 1, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		if m.ID == ids[0] {
			return poison
		}
		return k.deliver(ctx, m)
	}}
	n, err := r.RunOnce(ctx)
	require.ErrorIs(t, err, poison)
	assert.NotContains(t, err.Error(), "mark failed")
	assert.Equal(t, 1, n, "the message after the parked one goes on")
	assert.Equal(t, 1, k.count(ids[1]))
	var (
		failures int
		lastErr  string
	)
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT failures, last_error FROM "+table(schema, "outbox")+
		" WHERE id = $1", ids[0]).Scan(&failures, &lastErr))
	assert.Equal(t, 1, failures)
	assert.Contains(t, lastErr, "receiver said")
}
