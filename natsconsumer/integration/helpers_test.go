package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
)

// quiet is a logger that discards, for consumers whose warnings are expected.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start runs c until the end of the test, and checks that Run then
// returns the context's error.
func start(t *testing.T, c *natsconsumer.Consumer) {
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

// publish publishes body to subject, with id as its Nats-Msg-Id unless "".
func publish(t testing.TB, js jetstream.JetStream, subject, id, body string) {
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

// eventually waits for cond, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, 5*time.Millisecond, what)
}

// info returns the consumer's current info from the server.
func info(t testing.TB, c jetstream.Consumer) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	i, err := c.Info(ctx)
	require.NoError(t, err)
	return i
}

// settled reports whether every message of the consumer's stream was
// acked or terminated: none pending, none waiting for an ack.
func settled(t testing.TB, c jetstream.Consumer) bool {
	i := info(t, c)
	return i.NumPending == 0 && i.NumAckPending == 0 && i.NumRedelivered == 0
}

func config(runner *idempotency.Runner, handler consumer.Handler) consumer.Config {
	return consumer.Config{Runner: runner, Handler: handler, Logger: quiet()}
}

func keyOf(i int) string { return fmt.Sprintf("order-%03d", i) }

func bodyOf(i int) string { return "body of " + keyOf(i) }
