package integration_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/internal/drill"
)

// The store reset drill's settings.
const (
	resetMessages = 600
	resetLimit    = 4 // a delivery limit of 4 allows 5 deliveries
	resetRefused  = 1500 * time.Millisecond
)

// The consumer reaches PostgreSQL through a proxy that, at 30% of the
// effects, resets every connection and refuses new ones for 1.5 s, and at
// 65% resets them again; the handler writes its effect in the execution's
// transaction (batched, so several handlers share one). A store that
// cannot be reached is an outage of the store, never a verdict on a
// message: every effect happens once, nothing is terminated or
// dead-lettered.
func TestStoreConnectionsResetLoseNothing(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, dlq := amqptest.NewQueue(t, conn, resetLimit)
	ch := amqptest.Channel(t, conn)
	_, direct, schema := newOutbox(t)
	effects := drill.NewEffects(t, direct, schema)
	for i := range resetMessages {
		amqptest.Publish(t, ch, queue, amqptest.KeyOf(i), amqptest.BodyOf(i))
	}

	proxy, store := drill.ProxiedStore(t, pgDSN(), schema)
	runner := idempotency.NewRunner(store, idempotency.WithLease(2*time.Second))
	c, err := amqpconsumer.New(conn, queue, amqptest.Config(runner, effects.Handler), amqpconsumer.WithDeliveryLimit(resetLimit))
	require.NoError(t, err)
	amqptest.Start(t, c)

	cut := effects.ResetStoreTwice(t, proxy, resetMessages, resetRefused)
	// Every delivery settled: acked after its outcome was stored, or
	// (what must not happen) terminated.
	amqptest.Eventually(t, "every delivery settled", func() bool {
		st := c.Stats()
		return st.Executed+st.Duplicates >= resetMessages || st.Terminated > 0
	})

	all, distinct := effects.Count(t)
	st := c.Stats()
	t.Logf("%d connections reset; %d effects of %d keys; stats %+v", cut, all, distinct, st)
	assert.Equal(t, resetMessages, all, "each effect once")
	assert.Equal(t, resetMessages, distinct, "none lost")
	assert.Zero(t, st.Terminated, "no message terminated for the store's outage")
	assert.Zero(t, st.Parked)
	assert.Zero(t, amqptest.Count(t, conn, dlq), "nothing dead-lettered")
	assert.Positive(t, cut, "connections were reset")
}
