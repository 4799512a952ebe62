package natsconsumer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/internal/tcpproxy"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// A connection the other end drops before the handshake is not a
// reconnect: with the server's address refusing connections for a while
// (accepted, then closed at once) and then one cut, the consumer counts
// the one time the connection was restored, not nats.go's attempts.
func TestReconnectsCountRestoredConnections(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	proxy, err := tcpproxy.New(strings.TrimPrefix(natstest.URL(), "nats://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond),
		nats.ReconnectJitter(0, 0))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	pjs, err := jetstream.New(nc)
	require.NoError(t, err)
	cons, err := pjs.Consumer(t.Context(), stream, "work")
	require.NoError(t, err)
	c, err := natsconsumer.New(cons, natstest.Config(idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error { return nil }), natsconsumer.WithConn(nc))
	require.NoError(t, err)
	natstest.Start(t, c)

	proxy.Refuse(true)
	proxy.Cut()
	natstest.Eventually(t, "several connections dropped before their handshake", func() bool { return proxy.Refused() >= 5 })
	proxy.Refuse(false)
	natstest.Eventually(t, "nats.go reconnects", nc.IsConnected)
	natstest.Eventually(t, "the reconnect counted", func() bool { return c.Stats().Reconnects >= 1 })
	t.Logf("nats.go counts %d reconnects, the consumer %d, the proxy refused %d", nc.Stats().Reconnects, c.Stats().Reconnects, proxy.Refused())
	assert.Equal(t, uint64(1), c.Stats().Reconnects)
}
