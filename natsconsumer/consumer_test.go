package natsconsumer_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// Every message is handled once and acked after its outcome is stored;
// a message the store already completed (its ack was lost, say) is acked
// without running; a message without Nats-Msg-Id is keyed by its stream
// sequence.
func TestEachMessageOnceAndDuplicatesAcked(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	runner := idempotency.NewRunner(nil)
	var fx effects
	c, err := natsconsumer.New(cons, natstest.Config(runner, func(ctx context.Context, m *consumer.Message) error {
		fx.add(m.Key)
		return nil
	}))
	require.NoError(t, err)
	// An earlier instance completed order-000 and died before its ack.
	_, err = runner.Do(context.Background(), idempotency.Request{Caller: c.Caller(), Key: natstest.KeyOf(0),
		Fingerprint: idempotency.Fingerprint("MESSAGE", stream+".orders", "", []byte(natstest.BodyOf(0)))},
		func(context.Context, *idempotency.Execution) ([]byte, error) { return nil, nil })
	require.NoError(t, err)
	const n = 30
	for i := range n {
		natstest.Publish(t, js, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}
	natstest.Publish(t, js, stream+".orders", "", "no id")
	natstest.Start(t, c)
	natstest.Eventually(t, "every message settled", func() bool { return natstest.Settled(t, cons) })

	all, distinct := fx.total()
	assert.Equal(t, n, all, "one effect per message; none for the completed one")
	assert.Equal(t, n, distinct)
	assert.Equal(t, 0, fx.count(natstest.KeyOf(0)))
	assert.Equal(t, 1, fx.count(stream+":31"), "keyed by stream and sequence")
	st := c.Stats()
	assert.Equal(t, uint64(n), st.Executed)
	assert.Equal(t, uint64(1), st.Duplicates)
	assert.Zero(t, st.Terminated)
}
