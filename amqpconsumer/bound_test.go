package amqpconsumer_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Issue 41: the ends amqpconsumer promises (a stop within StopGrace, a
// Close, a refusal ending Run or Publish) come when promised, whatever
// the network or the broker does.

// closeBound is the bound of Conn.Close's wait for the broker (see the
// package documentation), and slack what the tests allow beyond a bound.
const (
	closeBound = time.Second
	slack      = time.Second
)

// within runs f and fails the test unless it returns within limit; it
// returns how long f took.
func within(t *testing.T, limit time.Duration, what string, f func()) time.Duration {
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
	took := time.Since(began)
	t.Logf("%s took %v", what, took.Round(time.Millisecond))
	return took
}

// withURL returns amqpURL with its user info or path changed by edit.
func withURL(t *testing.T, edit func(u *url.URL)) string {
	t.Helper()
	u, err := url.Parse(amqptest.URL())
	require.NoError(t, err)
	edit(u)
	return u.String()
}

// consuming starts a Conn's consumer of a new queue and returns once it
// has handled a message (its connection and channel open); stop cancels
// Run and returns its error.
func consuming(t *testing.T, conn *amqpconsumer.Conn, grace time.Duration) (stop func() error) {
	t.Helper()
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	handled := make(chan struct{}, 1)
	cfg := amqptest.Config(idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error {
		select {
		case handled <- struct{}{}:
		default:
		}
		return nil
	})
	cfg.StopGrace = grace
	c, err := conn.NewConsumer(queue, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	amqptest.Publish(t, amqptest.Channel(t, setup), queue, amqptest.KeyOf(0), amqptest.BodyOf(0))
	select {
	case <-handled:
	case err := <-done:
		done <- err
		t.Fatalf("Run returned %v before handling a message", err)
	case <-time.After(time.Minute):
		t.Fatal("the consumer did not handle a message")
	}
	return func() error {
		cancel()
		err := <-done
		done <- err
		return err
	}
}

// With the network silent (the connection open, every byte dropped), a
// consumer's stop ends within its grace and a second: the close of its
// channel waits for the rest of the grace, then the connection is closed
// hard, not left to the heartbeat.
func TestStopOnASilentNetworkEndsWithinTheGrace(t *testing.T) {
	proxy, via := viaProxy(t)
	conn := dial(t, via)
	const grace = 2 * time.Second
	stop := consuming(t, conn, grace)
	proxy.Hold()
	var err error
	within(t, grace+slack, "the stop", func() { err = stop() })
	assert.ErrorIs(t, err, context.Canceled)
	within(t, closeBound+slack, "Conn.Close after the stop", func() { _ = conn.Close() })
}

// With the network silent, Conn.Close waits for the broker's answer no
// longer than its bound, then closes the socket.
func TestConnCloseOnASilentNetworkIsBounded(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	proxy, via := viaProxy(t)
	conn := dial(t, via)
	pub, err := conn.NewPublisher("")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, pub.Publish(ctx, amqptest.KeyOf(0), queue, []byte(amqptest.BodyOf(0))), "the connection is open")
	proxy.Hold()
	within(t, closeBound+slack, "Conn.Close", func() { _ = conn.Close() })
}

// Against an address that accepts TCP connections and never speaks AMQP,
// Close cuts the dial in progress, its handshake included, rather than
// waiting for the dial timeout.
func TestConnCloseCutsAHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	// The listener takes the client's protocol header, and answers
	// nothing.
	accepted := make(chan net.Conn, 16)
	greeted := make(chan struct{}, 16)
	var loop, readers sync.WaitGroup
	loop.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
			readers.Go(func() {
				if _, err := io.ReadFull(c, make([]byte, 8)); err == nil {
					greeted <- struct{}{}
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		loop.Wait()
		close(accepted)
		for c := range accepted {
			_ = c.Close()
		}
		readers.Wait()
	})
	conn := dial(t, withURL(t, func(u *url.URL) { u.Host = ln.Addr().String() }))
	pub, err := conn.NewPublisher("")
	require.NoError(t, err)
	published := make(chan error, 1)
	go func() { published <- pub.Publish(context.Background(), amqptest.KeyOf(0), "nowhere", []byte("x")) }()
	select {
	case <-greeted: // the handshake has begun
	case <-time.After(time.Minute):
		t.Fatal("the Conn did not dial")
	}
	within(t, slack, "Conn.Close during a handshake", func() { _ = conn.Close() })
	err = <-published
	assert.ErrorIs(t, err, amqpconsumer.ErrConnClosed)
}

// A refusal of the connection itself (a wrong password, a vhost that does
// not exist) is not redialled for ever: Run returns it after one dial.
func TestRefusedConnectionEndsRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(u *url.URL)
	}{
		{"wrong password", func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), "not-the-password") }},
		{"unknown vhost", func(u *url.URL) { u.Path = "/" + amqptest.UniqueName("novhost") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup := amqptest.Connect(t)
			queue, _ := amqptest.NewQueue(t, setup, 5)
			proxy, via := viaProxy(t)
			u, err := url.Parse(via)
			require.NoError(t, err)
			tc.edit(u)
			conn := dial(t, u.String())
			c, err := conn.NewConsumer(queue, amqptest.Config(idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error { return nil }))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = c.Run(ctx)
			t.Logf("Run returned %v", err)
			require.NoError(t, ctx.Err(), "Run returned before its context ended")
			assert.ErrorIs(t, err, amqpconsumer.ErrRefused)
			var ae *amqp.Error
			if assert.True(t, errors.As(err, &ae), "Run returned %v", err) {
				assert.Contains(t, []int{amqp.AccessRefused, amqp.NotAllowed}, ae.Code)
			}
			assert.Equal(t, 1, proxy.Accepted(), "one dial")

			// A Publish on the Conn is refused the same way.
			pub, err := conn.NewPublisher("")
			require.NoError(t, err)
			err = pub.Publish(ctx, amqptest.KeyOf(0), queue, []byte(amqptest.BodyOf(0)))
			require.NoError(t, ctx.Err())
			assert.ErrorIs(t, err, amqpconsumer.ErrRefused)
			assert.Equal(t, 2, proxy.Accepted(), "one more dial")
		})
	}
}

// A publish to an exchange that does not exist is refused by the broker,
// which closes the channel: Publish returns the refusal at once, with the
// broker's reason, and sends nothing again.
func TestPublishToAMissingExchangeIsRefused(t *testing.T) {
	conn := dial(t, amqptest.URL())
	pub, err := conn.NewPublisher(amqptest.UniqueName("missing-exchange"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The first Publish dials; the second opens a channel on the open
	// connection, and is timed.
	for i := range 2 {
		var err error
		took := within(t, 10*time.Second, "Publish", func() { err = pub.Publish(ctx, amqptest.KeyOf(i), "orders", []byte(amqptest.BodyOf(i))) })
		t.Logf("Publish returned %v", err)
		require.NoError(t, ctx.Err(), "Publish returned before its context ended")
		assert.ErrorIs(t, err, amqpconsumer.ErrRefused)
		var ae *amqp.Error
		if assert.True(t, errors.As(err, &ae), "Publish returned %v", err) {
			assert.Equal(t, amqp.NotFound, ae.Code)
			assert.Contains(t, err.Error(), "no exchange", "the broker's reason")
		}
		if i == 1 {
			assert.Less(t, took, slack)
		}
	}
	assert.Zero(t, pub.Resent(), "nothing sent again")
}

// A Publish to a broker that never answers fails when its context ends,
// with an error that says why: the broker unreachable, and the last
// dial's failure.
func TestPublishToAnUnreachableBrokerSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	conn := dial(t, withURL(t, func(u *url.URL) { u.Host = addr }))
	pub, err := conn.NewPublisher("")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = pub.Publish(ctx, amqptest.KeyOf(0), "orders", []byte(amqptest.BodyOf(0)))
	t.Logf("Publish returned %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	msg := err.Error()
	assert.True(t, strings.Contains(msg, "unreachable") && strings.Contains(msg, "connection refused") && strings.Contains(msg, addr),
		"the error says why: %v", err)
}
