// Package amqptest holds what amqpconsumer's tests and its integration
// module's share: the test broker, queues of their own, publishing and
// counting, effects, and running a consumer for a test.
package amqptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// URL is the RabbitMQ server the tests use.
func URL() string {
	if u := os.Getenv("EXACTLYONCE_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// startCommand is how the tests' RabbitMQ is started on this project's machines.
const startCommand = "rabbitmq-server -detached"

// CheckServer exits the test binary with one message saying what the
// tests need and how to start it, unless the broker answers.
func CheckServer() {
	conn, err := amqp.Dial(URL())
	if err != nil {
		fmt.Fprintf(os.Stderr, "amqpconsumer: the tests need RabbitMQ at %s (EXACTLYONCE_AMQP_URL), and it is not reachable: %v\nstart it with: %s\n",
			URL(), err, startCommand)
		os.Exit(1)
	}
	conn.Close()
}

// Connect returns a new connection, closed at the end of the test.
func Connect(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Channel returns a new channel on conn for the test's own use.
func Channel(t testing.TB, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// UniqueName returns a queue name no other test uses.
func UniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// NewQueue declares a quorum queue of the test's own, with delivery limit
// limit (none when 0) and a dead-letter queue; both are deleted at the end.
func NewQueue(t testing.TB, conn *amqp.Connection, limit int) (queue, dlq string) {
	t.Helper()
	ch := Channel(t, conn)
	queue = UniqueName("eotest")
	dlq = queue + ".dlq"
	_, err := ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	args := amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
	if limit > 0 {
		args["x-delivery-limit"] = int32(limit)
	}
	_, err = ch.QueueDeclare(queue, true, false, false, false, args)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn, err := amqp.Dial(URL())
		if err != nil {
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		_, _ = ch.QueueDelete(queue, false, false, false)
		_, _ = ch.QueueDelete(dlq, false, false, false)
	})
	return queue, dlq
}

// Publish publishes body to queue with message id id ("" for none).
func Publish(t testing.TB, ch *amqp.Channel, queue, id, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{MessageId: id, Body: []byte(body)}))
}

// Count returns the number of ready messages of queue.
func Count(t testing.TB, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

// Effects counts the effects a handler performed, per key.
type Effects struct {
	mu   sync.Mutex
	runs map[string]int
}

// Add counts an effect for key.
func (e *Effects) Add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs == nil {
		e.runs = make(map[string]int)
	}
	e.runs[key]++
}

// Count returns how many effects key had.
func (e *Effects) Count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

// Total returns the number of effects and of keys with one.
func (e *Effects) Total() (all, distinct int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.runs {
		all += n
		distinct++
	}
	return all, distinct
}

// Config is a consumer configuration with a quiet logger.
func Config(runner *idempotency.Runner, handler consumer.Handler) consumer.Config {
	return consumer.Config{Runner: runner, Handler: handler, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// Start runs c until the end of the test, and checks that Run then
// returns the context's error.
func Start(t *testing.T, c *amqpconsumer.Consumer) {
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

// Eventually waits for cond, failing the test after a minute.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, 5*time.Millisecond, what)
}

// KeyOf is the id of the test's ith message.
func KeyOf(i int) string { return fmt.Sprintf("order-%03d", i) }

// BodyOf is the body of the test's ith message.
func BodyOf(i int) string { return "body of " + KeyOf(i) }

// DeadLetters returns the message ids in the dead-letter queue dlq, with
// why they are there, leaving them there.
func DeadLetters(t *testing.T, conn *amqp.Connection, dlq string) []string {
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var out []string
	for {
		d, ok, err := ch.Get(dlq, false)
		if err != nil || !ok {
			return out
		}
		out = append(out, fmt.Sprintf("%s (%v, x-delivery-count %v)", d.MessageId, d.Headers["x-first-death-reason"], d.Headers["x-delivery-count"]))
	}
}
