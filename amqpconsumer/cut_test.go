package amqpconsumer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/internal/tcpproxy"
)

// viaProxy starts a proxy to the tests' RabbitMQ, closed at the end of the
// test, and returns it with the URL that reaches the broker through it.
func viaProxy(t *testing.T) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(amqptest.URL())
	require.NoError(t, err)
	p, err := tcpproxy.New(u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	return p, u.String()
}

// dial returns a Conn to rawURL with quick redials and a quiet logger,
// closed at the end of the test.
func dial(t *testing.T, rawURL string, opts ...amqpconsumer.ConnOption) *amqpconsumer.Conn {
	t.Helper()
	opts = append([]amqpconsumer.ConnOption{
		amqpconsumer.WithRedialBackoff(backoff.FullJitter(5*time.Millisecond, 50*time.Millisecond)),
		amqpconsumer.WithConnLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}, opts...)
	c, err := amqpconsumer.Dial(rawURL, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// requireOnce checks that each of the n messages had its effect once.
func requireOnce(t *testing.T, fx *amqptest.Effects, n int) {
	t.Helper()
	all, distinct := fx.Total()
	assert.Equal(t, n, distinct, "every message had its effect")
	assert.Equal(t, n, all, "no message had its effect twice")
	for i := range n {
		assert.Equal(t, 1, fx.Count(amqptest.KeyOf(i)), amqptest.KeyOf(i))
	}
}

// A Conn's consumer whose connection is cut while a handler runs consumes
// again on a new connection; the delivery whose channel died is
// redelivered and not run again: every effect once, none lost.
func TestConnConsumerCutMidHandler(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	ch := amqptest.Channel(t, setup)
	proxy, via := viaProxy(t)
	conn := dial(t, via)
	const n = 20
	for i := range n {
		amqptest.Publish(t, ch, queue, amqptest.KeyOf(i), amqptest.BodyOf(i))
	}
	var fx amqptest.Effects
	inHandler, cut := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c, err := conn.NewConsumer(queue, amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		if m.Key == amqptest.KeyOf(3) {
			once.Do(func() {
				close(inHandler)
				<-cut
			})
		}
		fx.Add(m.Key)
		return nil
	}), amqpconsumer.WithDeliveryLimit(5))
	require.NoError(t, err)
	amqptest.Start(t, c)
	<-inHandler
	require.Positive(t, proxy.Cut(), "the consumer's connection is cut")
	close(cut)
	// The delivery whose channel died comes again, to the consumer on its
	// new channel, and is replayed from the store (it may come while its
	// handler still runs, and be given back once first).
	amqptest.Eventually(t, "every message handled, the cut one replayed", func() bool {
		_, distinct := fx.Total()
		return distinct == n && c.Stats().Duplicates >= 1 && amqptest.Count(t, setup, queue) == 0
	})
	requireOnce(t, &fx, n)
	assert.GreaterOrEqual(t, c.Stats().Reconnects, uint64(1), "the consumer counts its reconnect")
	assert.GreaterOrEqual(t, conn.Redials(), uint64(1))
}

// An ack lost with its connection (the handler's outcome stored, the ack
// sent but never at the broker) is followed by a redelivery that the
// store replays: acked without running.
func TestConnConsumerCutMidAck(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	ch := amqptest.Channel(t, setup)
	proxy, via := viaProxy(t)
	conn := dial(t, via)
	const n = 10
	for i := range n {
		amqptest.Publish(t, ch, queue, amqptest.KeyOf(i), amqptest.BodyOf(i))
	}
	var fx amqptest.Effects
	var once sync.Once
	held := make(chan struct{})
	cfg := amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		fx.Add(m.Key)
		if m.Key == amqptest.KeyOf(5) {
			// What the consumer sends from now on (this delivery's ack)
			// waits in the proxy.
			once.Do(func() {
				proxy.Hold()
				close(held)
			})
		}
		return nil
	})
	cfg.MaxInFlight = 1 // nothing but the ack is sent while held
	c, err := conn.NewConsumer(queue, cfg, amqpconsumer.WithDeliveryLimit(5))
	require.NoError(t, err)
	amqptest.Start(t, c)
	<-held
	amqptest.Eventually(t, "the ack is sent, and held", func() bool { return proxy.HeldBytes() >= ackFrameSize })
	require.Positive(t, proxy.Cut())
	amqptest.Eventually(t, "every message handled", func() bool {
		_, distinct := fx.Total()
		return distinct == n && amqptest.Count(t, setup, queue) == 0 && c.Stats().Duplicates >= 1
	})
	requireOnce(t, &fx, n)
	st := c.Stats()
	assert.GreaterOrEqual(t, st.Duplicates, uint64(1), "the redelivery of the message whose ack was lost is replayed")
	assert.GreaterOrEqual(t, st.Reconnects, uint64(1))
}

// ackFrameSize is the size of a basic.ack frame: a heartbeat (8 bytes) is
// smaller.
const ackFrameSize = 21

// A publish whose connection is cut before the broker confirmed it is
// published again on a new connection, and confirmed.
func TestConnPublisherCutMidPublish(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	proxy, via := viaProxy(t)
	conn := dial(t, via)
	pub, err := conn.NewPublisher("")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, pub.Publish(ctx, amqptest.KeyOf(0), queue, []byte(amqptest.BodyOf(0))), "the channel opens at the first publish")
	proxy.Hold()
	body := make([]byte, 2048)
	done := make(chan error, 1)
	go func() { done <- pub.Publish(ctx, amqptest.KeyOf(1), queue, body) }()
	amqptest.Eventually(t, "the publish is sent, and held", func() bool { return proxy.HeldBytes() >= len(body) })
	require.Positive(t, proxy.Cut())
	require.NoError(t, <-done, "the publish is sent again and confirmed")
	assert.Equal(t, uint64(1), pub.Resent())
	amqptest.Eventually(t, "both messages in the queue", func() bool { return amqptest.Count(t, setup, queue) == 2 })
}

// Under publishes and consumption on one Conn, its connection cut again and
// again, and refused for a while: every message published is confirmed and
// has its effect once.
func TestConnCutsUnderLoad(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 20)
	proxy, via := viaProxy(t)
	conn := dial(t, via)
	pub, err := conn.NewPublisher("")
	require.NoError(t, err)
	var fx amqptest.Effects
	c, err := conn.NewConsumer(queue, amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		fx.Add(m.Key)
		return nil
	}), amqpconsumer.WithDeliveryLimit(20))
	require.NoError(t, err)
	amqptest.Start(t, c)
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reconnected := func(k uint64) {
		amqptest.Eventually(t, "the consumer consumes again after the cut", func() bool { return c.Stats().Reconnects >= k })
	}
	for i := range n {
		switch i {
		case 75:
			proxy.Cut()
		case 150:
			reconnected(1)
			proxy.Refuse(true)
			proxy.Cut()
			amqptest.Eventually(t, "the Conn redials while refused", func() bool { return proxy.Refused() >= 2 })
			proxy.Refuse(false)
		case 225:
			reconnected(2)
			proxy.Cut()
		}
		require.NoError(t, pub.Publish(ctx, amqptest.KeyOf(i), queue, []byte(fmt.Sprint(i))), amqptest.KeyOf(i))
	}
	amqptest.Eventually(t, "every message handled", func() bool {
		_, distinct := fx.Total()
		return distinct == n && amqptest.Count(t, setup, queue) == 0
	})
	requireOnce(t, &fx, n)
	assert.GreaterOrEqual(t, c.Stats().Reconnects, uint64(3), "one reconnect per cut")
	assert.GreaterOrEqual(t, conn.Redials(), uint64(3))
}

// A Publisher on a channel of its own (NewPublisher) whose connection is
// lost before the broker confirmed a publish returns an error at once.
func TestChannelPublisherCutMidPublishFails(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	proxy, via := viaProxy(t)
	conn, err := amqp.Dial(via)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	pub, err := amqpconsumer.NewPublisher(ch, "")
	require.NoError(t, err)
	proxy.Hold()
	body := make([]byte, 2048)
	done := make(chan error, 1)
	go func() { done <- pub.Publish(context.Background(), amqptest.KeyOf(1), queue, body) }()
	amqptest.Eventually(t, "the publish is sent, and held", func() bool { return proxy.HeldBytes() >= len(body) })
	require.Positive(t, proxy.Cut())
	select {
	case err := <-done:
		require.Error(t, err, "the publish was not confirmed")
	case <-time.After(30 * time.Second):
		t.Fatal("Publish did not return within 30 s of its connection's loss")
	}
}
