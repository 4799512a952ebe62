package natsconsumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

var errFlaky = errors.New("the warehouse answered 503")

// A handler that fails transiently has its message redelivered (after a
// full-jitter backoff) until it succeeds; its effect happens once.
func TestTransientFailureRedelivered(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{MaxDeliver: 5})
	var fx effects
	var calls atomic.Int32
	cfg := natstest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		if m.Delivery < 3 {
			return errFlaky
		}
		fx.add(m.Key)
		return nil
	})
	cfg.Backoff = backoff.FullJitter(time.Millisecond, 10*time.Millisecond)
	c, err := natsconsumer.New(cons, cfg)
	require.NoError(t, err)
	const n = 10
	for i := range n {
		natstest.Publish(t, js, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}
	natstest.Start(t, c)
	natstest.Eventually(t, "every message settled", func() bool { return natstest.Settled(t, cons) && c.Stats().Executed == n })
	all, distinct := fx.total()
	assert.Equal(t, n, all)
	assert.Equal(t, n, distinct)
	assert.Equal(t, int32(3*n), calls.Load(), "two failed deliveries and a good one each")
	st := c.Stats()
	assert.Equal(t, uint64(2*n), st.Retried)
	assert.Zero(t, st.Terminated)
}

// A permanent failure terminates the message and parks its execution with
// the reason; once mended, RetryParked runs the handler again with the
// stored message.
func TestPermanentFailureParkedThenRetried(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	var fx effects
	var mended atomic.Bool
	var seen atomic.Value
	c, err := natsconsumer.New(cons, natstest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		if !mended.Load() {
			return retry.Permanent(errors.New("no such product"))
		}
		seen.Store(string(m.Body) + " on " + m.Subject)
		fx.add(m.Key)
		return nil
	}))
	require.NoError(t, err)
	natstest.Publish(t, js, stream+".orders", "order-1", "2 chairs")
	natstest.Start(t, c)
	natstest.Eventually(t, "the message terminated", func() bool { return natstest.Settled(t, cons) && c.Stats().Parked == 1 })
	assert.Equal(t, uint64(1), natstest.Info(t, cons).Delivered.Consumer, "delivered once, never again")

	parked, err := c.ListParked(context.Background(), "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Equal(t, "order-1", parked[0].Key)
	assert.Equal(t, "no such product", parked[0].Parked)

	mended.Store(true)
	require.NoError(t, c.RetryParked(context.Background(), "order-1"))
	assert.Equal(t, 1, fx.count("order-1"))
	assert.Equal(t, "2 chairs on "+stream+".orders", seen.Load())
	parked, err = c.ListParked(context.Background(), "", 0)
	require.NoError(t, err)
	assert.Empty(t, parked)

}

// The delivery that reaches MaxDeliver is not given back to be dropped:
// a transient failure on it parks the execution with its reason.
func TestLastDeliveryParked(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{MaxDeliver: 2})
	var calls atomic.Int32
	cfg := natstest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		return errFlaky
	})
	cfg.Backoff = backoff.FullJitter(time.Millisecond, 10*time.Millisecond)
	c, err := natsconsumer.New(cons, cfg)
	require.NoError(t, err)
	natstest.Publish(t, js, stream+".orders", "order-1", "2 chairs")
	natstest.Start(t, c)
	natstest.Eventually(t, "the message parked", func() bool { return c.Stats().Parked == 1 && natstest.Settled(t, cons) })
	assert.Equal(t, int32(2), calls.Load())
	parked, err := c.ListParked(context.Background(), "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Contains(t, parked[0].Parked, "last delivery (2) failed")
	assert.Contains(t, parked[0].Parked, errFlaky.Error())
}

// A delivery whose key another execution holds is not run: it is given
// back with the hint's delay, and its redelivery, once the other
// completed, is acked without running.
func TestInProgressElsewhereRedeliveredLater(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	runner := idempotency.NewRunner(nil)
	var calls atomic.Int32
	c, err := natsconsumer.New(cons, natstest.Config(runner, func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		return nil
	}))
	require.NoError(t, err)
	// Another instance holds order-1.
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := runner.Do(context.Background(), idempotency.Request{Caller: c.Caller(), Key: "order-1",
			Fingerprint: idempotency.Fingerprint("MESSAGE", stream+".orders", "", []byte("2 chairs"))},
			func(context.Context, *idempotency.Execution) ([]byte, error) {
				close(holding)
				<-release
				return nil, nil
			})
		done <- err
	}()
	<-holding
	natstest.Publish(t, js, stream+".orders", "order-1", "2 chairs")
	natstest.Start(t, c)
	natstest.Eventually(t, "the delivery given back", func() bool { return c.Stats().InProgress >= 1 })
	close(release)
	require.NoError(t, <-done)
	natstest.Eventually(t, "the redelivery acked", func() bool { return natstest.Settled(t, cons) && c.Stats().Duplicates == 1 })
	assert.Zero(t, calls.Load(), "the other execution ran it")
	assert.GreaterOrEqual(t, natstest.Info(t, cons).Delivered.Consumer, uint64(2))
}

// A handler that runs past the consumer's AckWait keeps its delivery
// (InProgress) and its lease (Extend): the message is delivered once and
// handled once.
func TestSlowHandlerKeptAlive(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	// Kept alive every third of it: a margin of over a second, for a
	// loaded machine.
	const ackWait = 2 * time.Second
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{AckWait: ackWait})
	runner := idempotency.NewRunner(nil, idempotency.WithLease(ackWait))
	var calls atomic.Int32
	c, err := natsconsumer.New(cons, natstest.Config(runner, func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		select { // the handler is slow: it outlives its AckWait and lease twice and a half
		case <-time.After(5 * ackWait / 2):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	require.NoError(t, err)
	natstest.Publish(t, js, stream+".orders", "order-1", "2 chairs")
	natstest.Start(t, c)
	natstest.Eventually(t, "the message acked", func() bool { return natstest.Settled(t, cons) && c.Stats().Executed == 1 })
	assert.Equal(t, int32(1), calls.Load())
	assert.Equal(t, uint64(1), natstest.Info(t, cons).Delivered.Consumer, "never redelivered")
}

// While the handler's dependency is down the consumer fetches no more
// than it holds, and burns no delivery: with MaxDeliver 2, every message
// is handled once when the dependency comes back, none parked.
func TestOutageRiddenThrough(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{MaxDeliver: 2})
	var down atomic.Bool
	down.Store(true)
	var fx effects
	cfg := natstest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		if down.Load() {
			return &retry.Error{Reason: retry.ErrDependencyDown, Last: errFlaky}
		}
		fx.add(m.Key)
		return nil
	})
	cfg.MaxInFlight = 4
	cfg.Backoff = backoff.FullJitter(time.Millisecond, 20*time.Millisecond)
	c, err := natsconsumer.New(cons, cfg)
	require.NoError(t, err)
	const n = 40
	for i := range n {
		natstest.Publish(t, js, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}
	natstest.Start(t, c)
	natstest.Eventually(t, "deliveries held through the outage", func() bool { return c.Stats().Held >= 20 })
	i := natstest.Info(t, cons)
	assert.LessOrEqual(t, i.NumAckPending, 4, "no more fetched than handled")
	assert.GreaterOrEqual(t, i.NumPending, uint64(n-4), "the rest waits in the stream")
	assert.Zero(t, i.NumRedelivered)
	down.Store(false)
	natstest.Eventually(t, "every message handled", func() bool { return natstest.Settled(t, cons) && c.Stats().Executed == n })
	all, distinct := fx.total()
	assert.Equal(t, n, all)
	assert.Equal(t, n, distinct)
	st := c.Stats()
	assert.Zero(t, st.Parked)
	assert.Zero(t, st.Terminated)
	assert.GreaterOrEqual(t, st.Outages, uint64(1))
}
