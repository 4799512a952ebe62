package natsconsumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// A nats-server killed while a handler runs and started again on its
// store directory: nats.go reconnects, the consumer rides it through
// (counting the reconnect), the delivery whose ack never came is
// redelivered and replayed from the store, and every message has its
// effect once.
func TestServerKilledAndRestarted(t *testing.T) {
	srv := startNATSServer(t)
	nc, err := nats.Connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectJitter(10*time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream := natstest.UniqueName("RESTART")
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{AckWait: 2 * time.Second, MaxDeliver: 20})

	var fx effects
	inHandler, restarted := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c, err := natsconsumer.New(cons, natstest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		if m.Key == natstest.KeyOf(30) {
			once.Do(func() {
				close(inHandler)
				<-restarted
			})
		}
		fx.add(m.Key)
		return nil
	}), natsconsumer.WithConn(nc))
	require.NoError(t, err)
	const n = 100
	for i := range n / 2 {
		natstest.Publish(t, js, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}
	natstest.Start(t, c)
	<-inHandler
	srv.kill()
	srv.start()
	close(restarted)
	reconnected := func() bool { return nc.IsConnected() }
	natstest.Eventually(t, "nats.go reconnects", reconnected)
	for i := n / 2; i < n; i++ {
		natstest.Publish(t, js, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}
	natstest.Eventually(t, "every message handled", func() bool {
		_, distinct := fx.total()
		return distinct == n
	})
	natstest.Eventually(t, "every message acked", func() bool { return natstest.Settled(t, cons) })
	all, distinct := fx.total()
	assert.Equal(t, n, distinct)
	assert.Equal(t, n, all, "no message had its effect twice")
	assert.GreaterOrEqual(t, c.Stats().Reconnects, uint64(1), "the consumer counts nats.go's reconnect")
}
