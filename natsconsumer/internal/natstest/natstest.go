// Package natstest holds what natsconsumer's tests and its integration
// module's share: the test server, streams and consumers of their own,
// publishing, and waiting for a consumer to settle.
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
)

// URL is the NATS server with JetStream the tests use.
func URL() string {
	if u := os.Getenv("EXACTLYONCE_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// startCommand starts a NATS server with JetStream where the tests look
// for it (.ci/run starts it in the background the same way).
const startCommand = "nats-server -a 127.0.0.1 -p 4222 -js &"

// CheckServer exits the test binary with one message saying what the
// tests need and how to start it, unless the server answers.
func CheckServer() {
	if err := checkServer(); err != nil {
		fmt.Fprintf(os.Stderr, "natsconsumer: the tests need NATS with JetStream at %s (EXACTLYONCE_NATS_URL), and it is not usable: %v\nstart it with: %s\n",
			URL(), err, startCommand)
		os.Exit(1)
	}
}

// checkServer connects once and asks JetStream for the account.
func checkServer() error {
	nc, err := nats.Connect(URL(), nats.Timeout(3*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// Connect returns a JetStream context on a new connection, closed at the
// end of the test.
func Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(URL())
	if err != nil {
		t.Fatalf("connect to NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// UniqueName returns a stream name no other test uses.
func UniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// NewStream creates a stream of its own for the test on subjects
// "<name>.>", deleted at the end of the test.
func NewStream(t testing.TB, js jetstream.JetStream) string {
	t.Helper()
	name := UniqueName("EOTEST")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return name
}

// NewPullConsumer creates a durable pull consumer with explicit acks on
// stream ("work" unless cfg names another).
func NewPullConsumer(t testing.TB, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) jetstream.Consumer {
	t.Helper()
	if cfg.Durable == "" {
		cfg.Durable = "work"
	}
	cfg.AckPolicy = jetstream.AckExplicitPolicy
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	return c
}

// Quiet is a logger that discards, for consumers whose warnings are expected.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Start runs c until the end of the test, and checks that Run then
// returns the context's error.
func Start(t *testing.T, c *natsconsumer.Consumer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30 s of its context's end")
		}
	})
}

// Publish publishes body to subject, with id as its Nats-Msg-Id unless "".
func Publish(t testing.TB, js jetstream.JetStream, subject, id, body string) {
	t.Helper()
	msg := &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{}}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := js.PublishMsg(ctx, msg, opts...)
	require.NoError(t, err)
}

// Eventually waits for cond, failing the test after a minute.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, 5*time.Millisecond, what)
}

// Info returns the consumer's current info from the server.
func Info(t testing.TB, c jetstream.Consumer) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	i, err := c.Info(ctx)
	require.NoError(t, err)
	return i
}

// Settled reports whether every message of the consumer's stream was
// acked or terminated: none pending, none waiting for an ack.
func Settled(t testing.TB, c jetstream.Consumer) bool {
	i := Info(t, c)
	return i.NumPending == 0 && i.NumAckPending == 0 && i.NumRedelivered == 0
}

// Config is a consumer's configuration with runner and handler, logging
// nothing.
func Config(runner *idempotency.Runner, handler consumer.Handler) consumer.Config {
	return consumer.Config{Runner: runner, Handler: handler, Logger: Quiet()}
}

// KeyOf is the id of the test's ith message, BodyOf its body.
func KeyOf(i int) string { return fmt.Sprintf("order-%03d", i) }

// BodyOf is the body of the test's ith message.
func BodyOf(i int) string { return "body of " + KeyOf(i) }
