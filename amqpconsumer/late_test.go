package amqpconsumer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// A consumer stopped while a quorum queue streams it last deliveries
// loses none. A quorum queue returns the messages it assigned to a
// consumer and had not yet delivered when the consumer's channel closes,
// counting a delivery, and one cancelled with basic.cancel never gets
// them: a stop that cancelled its subscription dead-lettered those on
// their last delivery unseen (13 to 33 of 600 here). The last deliveries
// the stopping consumer takes go to the store: the next consumer's
// Reconciler runs them, without RetryParked.
func TestStopWhileTheQueueStreamsLastDeliveries(t *testing.T) {
	const messages = 600
	conn := amqptest.Connect(t)
	queue, dlq := amqptest.NewQueue(t, conn, 1)
	ch := amqptest.Channel(t, conn)
	for i := range messages {
		amqptest.Publish(t, ch, queue, fmt.Sprintf("last-%04d", i), "x")
	}
	giveAllBackOnce(t, queue, messages)
	amqptest.Eventually(t, "all given back", func() bool { return amqptest.Count(t, conn, queue) == messages })
	require.Zero(t, amqptest.Count(t, conn, dlq))

	store := idempotency.NewMemoryStore(nil)
	var (
		handled atomic.Int64
		mu      sync.Mutex
		runs    = make(map[string]int)
	)
	handler := func(_ context.Context, m *consumer.Message) error {
		handled.Add(1)
		mu.Lock()
		runs[m.Key]++
		mu.Unlock()
		return nil
	}
	cfg := amqptest.Config(idempotency.NewRunner(store), handler)
	cfg.ReconcileInterval = 100 * time.Millisecond
	c, err := amqpconsumer.New(amqptest.Connect(t), queue, cfg, amqpconsumer.WithDeliveryLimit(1))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	amqptest.Eventually(t, "the consumer handles some", func() bool { return handled.Load() >= messages/6 })
	cancel() // while the queue streams it more
	require.ErrorIs(t, <-ran, context.Canceled)
	st := c.Stats()
	t.Logf("stopped after %d executed, %d handed to the store", st.Executed, st.HandedOver)
	assert.Zero(t, st.Parked)

	cfg.Runner = idempotency.NewRunner(store)
	next, err := amqpconsumer.New(amqptest.Connect(t), queue, cfg, amqpconsumer.WithDeliveryLimit(1))
	require.NoError(t, err)
	amqptest.Start(t, next)
	amqptest.Eventually(t, "the rest handled", func() bool { return amqptest.Count(t, conn, queue) == 0 && handled.Load() >= messages })
	mu.Lock()
	defer mu.Unlock()
	for i := range messages {
		assert.Equal(t, 1, runs[fmt.Sprintf("last-%04d", i)], "runs of last-%04d", i)
	}
	parked, err := next.ListParked(context.Background(), "", messages)
	require.NoError(t, err)
	assert.Empty(t, parked)
	// The close gave back the handed-over ones, which the queue
	// dead-lettered: copies of messages the store owns, never one it does
	// not.
	for _, l := range amqptest.DeadLetters(t, conn, dlq) {
		key := strings.Fields(l)[0]
		rec, err := store.Get(context.Background(), queue, key)
		require.NoError(t, err, "dead-lettered %s, unknown to the store", key)
		assert.Equal(t, idempotency.StateCompleted, rec.State, key)
	}
}

// giveAllBackOnce takes the n messages of queue and gives them all back,
// so that the next delivery of each is its last under a limit of 1.
func giveAllBackOnce(t *testing.T, queue string, n int) {
	t.Helper()
	ch := amqptest.Channel(t, amqptest.Connect(t))
	require.NoError(t, ch.Qos(n, 0, false))
	ds, err := ch.Consume(queue, "give-back", false, false, false, false, nil)
	require.NoError(t, err)
	timeout := time.After(time.Minute)
	var last uint64
	for i := range n {
		select {
		case d := <-ds:
			last = d.DeliveryTag
		case <-timeout:
			t.Fatalf("got %d of %d messages", i, n)
		}
	}
	// All of them here, none in flight: cancel, so that nothing given
	// back comes here again, then give them back.
	require.NoError(t, ch.Cancel("give-back", false))
	require.NoError(t, ch.Nack(last, true, true))
	require.NoError(t, ch.Close())
}
