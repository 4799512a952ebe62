package natsconsumer_test

import (
	"context"
	"errors"
	"net/url"
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

// Issue 41: the ends natsconsumer promises (a stop within StopGrace, a
// Publish that fails when its context ends and says why, a refusal at
// once, Run's end when its JetStream consumer goes) come when promised,
// whatever the network or the server does.

// slack is what the tests allow beyond a bound.
const slack = time.Second

// within runs f and fails the test unless it returns within limit.
func within(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Errorf("%s did not return within %v", what, limit)
		<-done
	}
	t.Logf("%s took %v", what, time.Since(began).Round(time.Millisecond))
}

// proxied connects to NATS through a TCP proxy of the test's own, which
// the test can silence; both are closed at the end of the test.
func proxied(t *testing.T) (*tcpproxy.Proxy, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	u, err := url.Parse(natstest.URL())
	require.NoError(t, err)
	p, err := tcpproxy.New(u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	nc, err := nats.Connect(u.String())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return p, nc, js
}

// A consumer whose network goes silent (the connection open, every byte
// dropped) while it holds deliveries stops within its StopGrace when its
// context ends (a grace above the pull request's own bound of 3 s, see
// the package documentation).
func TestStopOnASilentNetworkEndsWithinGrace(t *testing.T) {
	const grace = 3 * time.Second
	_, setup := natstest.Connect(t)
	stream := natstest.NewStream(t, setup)
	natstest.NewPullConsumer(t, setup, stream, jetstream.ConsumerConfig{AckWait: 10 * time.Second})
	for i := range 5 {
		natstest.Publish(t, setup, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}
	p, _, js := proxied(t)
	cons, err := js.Consumer(t.Context(), stream, "work")
	require.NoError(t, err)
	handled := make(chan struct{}, 5)
	release := make(chan struct{})
	defer close(release)
	cfg := natstest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		handled <- struct{}{}
		select { // runs past the stop's grace period
		case <-ctx.Done():
		case <-release:
		}
		return errors.New("interrupted")
	})
	cfg.StopGrace = grace
	c, err := natsconsumer.New(cons, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	<-handled
	p.Hold()
	cancel()
	within(t, grace+slack, "the stop on a silent network", func() { <-ran })
}

// A Publish on a silent network fails when its context ends, saying that
// no stream acked it, and matching the context's error.
func TestPublishOnASilentNetworkSaysWhy(t *testing.T) {
	_, setup := natstest.Connect(t)
	stream := natstest.NewStream(t, setup)
	p, _, js := proxied(t)
	p.Hold()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var err error
	within(t, 500*time.Millisecond+slack, "Publish on a silent network", func() {
		err = natsconsumer.Publish(ctx, js, "order-1", stream+".orders", []byte("body"))
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "no ack from a stream")
	p.Release()
}

// A Publish to a subject no stream listens on fails within half a second
// (nats.go tries twice more, 250 ms apart, riding out a stream leader's
// election).
func TestPublishWithoutAStreamFailsAtOnce(t *testing.T) {
	_, js := natstest.Connect(t)
	var err error
	within(t, 500*time.Millisecond+slack, "Publish to a subject without a stream", func() {
		err = natsconsumer.Publish(t.Context(), js, "order-1", natstest.UniqueName("nostream")+".orders", []byte("body"))
	})
	require.Error(t, err)
	assert.True(t, errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders), "%v", err)
}

// Run ends, with an error that says so, when its JetStream consumer is
// deleted.
func TestRunEndsWhenItsConsumerIsDeleted(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	c, err := natsconsumer.New(cons, natstest.Config(idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error { return nil }))
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(t.Context()) }()
	natstest.Publish(t, js, stream+".orders", natstest.KeyOf(0), natstest.BodyOf(0))
	natstest.Eventually(t, "the message handled", func() bool { return c.Stats().Executed == 1 })
	require.NoError(t, js.DeleteConsumer(t.Context(), stream, "work"))
	within(t, 5*time.Second, "Run after its consumer was deleted", func() {
		err = <-ran
	})
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.Canceled)
	t.Logf("Run returned: %v", err)
}
