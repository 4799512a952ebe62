package amqpconsumer_test

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
	"go.uber.org/goleak"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// amqpURL is the RabbitMQ server the tests use.
func amqpURL() string {
	if u := os.Getenv("EXACTLYONCE_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// startCommand is how the tests' RabbitMQ is started on this project's machines.
const startCommand = "rabbitmq-server -detached"

func TestMain(m *testing.M) {
	conn, err := amqp.Dial(amqpURL())
	if err != nil {
		fmt.Fprintf(os.Stderr, "amqpconsumer: the tests need RabbitMQ at %s (EXACTLYONCE_AMQP_URL), and it is not reachable: %v\nstart it with: %s\n",
			amqpURL(), err, startCommand)
		os.Exit(1)
	}
	conn.Close()
	goleak.VerifyTestMain(m)
}

// connect returns a new connection, closed at the end of the test.
func connect(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(amqpURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// channel returns a new channel on conn for the test's own use.
func channel(t testing.TB, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// uniqueName returns a queue name no other test uses.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// newQueue declares a quorum queue of the test's own, with delivery limit
// limit (none when 0) and a dead-letter queue; both are deleted at the end.
func newQueue(t testing.TB, conn *amqp.Connection, limit int) (queue, dlq string) {
	t.Helper()
	ch := channel(t, conn)
	queue = uniqueName("eotest")
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
		conn, err := amqp.Dial(amqpURL())
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

// publish publishes body to queue with message id id ("" for none).
func publish(t testing.TB, ch *amqp.Channel, queue, id, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{MessageId: id, Body: []byte(body)}))
}

// count returns the number of ready messages of queue.
func count(t testing.TB, conn *amqp.Connection, queue string) int {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

// effects counts the effects a handler performed, per key.
type effects struct {
	mu   sync.Mutex
	runs map[string]int
}

func (e *effects) add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs == nil {
		e.runs = make(map[string]int)
	}
	e.runs[key]++
}

func (e *effects) count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

// total returns the number of effects and of keys with one.
func (e *effects) total() (all, distinct int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.runs {
		all += n
		distinct++
	}
	return all, distinct
}

// config is a consumer configuration with a quiet logger.
func config(runner *idempotency.Runner, handler consumer.Handler) consumer.Config {
	return consumer.Config{Runner: runner, Handler: handler, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// start runs c until the end of the test, and checks that Run then
// returns the context's error.
func start(t *testing.T, c *amqpconsumer.Consumer) {
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

// eventually waits for cond, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, 5*time.Millisecond, what)
}

func keyOf(i int) string  { return fmt.Sprintf("order-%03d", i) }
func bodyOf(i int) string { return "body of " + keyOf(i) }

// deadLetters returns the message ids in the dead-letter queue dlq, with
// why they are there, leaving them there.
func deadLetters(t *testing.T, conn *amqp.Connection, dlq string) []string {
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
