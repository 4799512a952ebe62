package natsconsumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// A message says when the stream took it (Message.Published), and the
// consumer's Observer hears how long it waited there.
func TestMessageSaysWhenTheStreamTookIt(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	before := time.Now()
	natstest.Publish(t, js, stream+".orders", "k1", "body")
	published := make(chan time.Time, 1)
	waited := make(chan consumer.Event, 1)
	cfg := natstest.Config(idempotency.NewRunner(nil), func(_ context.Context, m *consumer.Message) error {
		published <- m.Published
		return nil
	})
	cfg.Observer = func(_ context.Context, e consumer.Event) {
		if e.Kind == consumer.EventDelivered {
			waited <- e
		}
	}
	c, err := natsconsumer.New(cons, cfg)
	require.NoError(t, err)
	natstest.Start(t, c)
	at := <-published
	assert.WithinRange(t, at, before.Add(-time.Second), time.Now(), "the stream's timestamp (its clock is this machine's)")
	e := <-waited
	assert.True(t, e.WaitKnown)
	assert.GreaterOrEqual(t, e.Waited, time.Duration(0))
}
