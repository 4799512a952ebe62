package integration_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/internal/drill"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// The store reset drill's settings.
const (
	resetMessages   = 600
	resetMaxDeliver = 5
	resetRefused    = 1500 * time.Millisecond // new connections refused after the first reset
)

// The consumer reaches PostgreSQL through a proxy that, at 30% of the
// effects, resets every connection and refuses new ones for 1.5 s, and at
// 65% resets them again; the handler writes its effect in the execution's
// transaction (batched, so several handlers share one). A store that
// cannot be reached is an outage of the store, never a verdict on a
// message: every effect happens once, no message is terminated, with a
// delivery limit of 5.
func TestStoreConnectionsResetLoseNothing(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{MaxDeliver: resetMaxDeliver, AckWait: 2 * time.Second})
	_, direct, schema := newOutbox(t)
	effects := drill.NewEffects(t, direct, schema)
	for i := range resetMessages {
		natstest.Publish(t, js, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}

	proxy, store := drill.ProxiedStore(t, pgDSN(), schema)
	runner := idempotency.NewRunner(store, idempotency.WithLease(2*time.Second))
	c, err := natsconsumer.New(cons, consumer.Config{Runner: runner, Name: "ship", Handler: effects.Handler, Logger: natstest.Quiet()})
	require.NoError(t, err)
	natstest.Start(t, c)

	cut := effects.ResetStoreTwice(t, proxy, resetMessages, resetRefused)
	// Every delivery acked (after its outcome was stored) or terminated.
	natstest.Eventually(t, "every delivery settled", func() bool { return natstest.Settled(t, cons) })

	all, distinct := effects.Count(t)
	st := c.Stats()
	t.Logf("%d connections reset; %d effects of %d keys; stats %+v", cut, all, distinct, st)
	assert.Equal(t, resetMessages, all, "each effect once")
	assert.Equal(t, resetMessages, distinct, "none lost")
	assert.Zero(t, st.Terminated, "no message terminated for the store's outage")
	assert.Zero(t, st.Parked)
	assert.Positive(t, cut, "connections were reset")
}
