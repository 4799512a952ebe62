package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/pgstore"
)

// Environment of the relay child process.
const (
	relayChildEnv = "EXACTLYONCE_TEST_RELAY_SCHEMA"
	relayQueueEnv = "EXACTLYONCE_TEST_RELAY_QUEUE"
)

// pgDSN is the PostgreSQL server of the outbox tests.
func pgDSN() string {
	if dsn := os.Getenv("EXACTLYONCE_PG_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// newOutbox migrates a schema of its own for the test, dropped at its end.
func newOutbox(t *testing.T) (*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgDSN())
	require.NoError(t, err)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		t.Fatalf("the outbox tests need PostgreSQL at %s (EXACTLYONCE_PG_DSN): %v\nstart it (on Debian: pg_ctlcluster VERSION main start)", pgDSN(), err)
	}
	schema := strings.ReplaceAll(amqptest.UniqueName("eo_amqp"), "-", "_")
	require.NoError(t, pgstore.Migrate(ctx, pool, schema))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		pool.Close()
	})
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	require.NoError(t, err)
	return store, pool, schema
}

// relayChild runs in the child process: one batch of the outbox relay,
// which says "published" once the broker confirmed its message and then
// hangs before marking it sent, until it is killed.
func relayChild(schema, queue string) int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool, err := pgxpool.New(ctx, pgDSN())
	if err != nil {
		return fail(err)
	}
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		return fail(err)
	}
	conn, err := amqp.Dial(amqptest.URL())
	if err != nil {
		return fail(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	pub, err := amqpconsumer.NewPublisher(ch, "")
	if err != nil {
		return fail(err)
	}
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		if err := pub.Publish(ctx, m.ID, queue, m.Payload); err != nil {
			return err
		}
		fmt.Println("published", m.ID)
		select {} // killed here, before the row is marked sent
	}}
	_, err = relay.RunOnce(ctx)
	return fail(fmt.Errorf("relay returned: %v", err))
}

// A relay killed (SIGKILL) between publishing an outbox row (confirmed)
// and marking it sent leaves the row unsent; the next relay publishes it
// again, RabbitMQ keeps both copies, and the consumer, keyed by the row's
// id, handles the message once and acks the repeat.
func TestOutboxRelayKilledBetweenPublishAndMark(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, conn, 0)
	store, pool, schema := newOutbox(t)
	ctx := context.Background()
	id, err := store.Enqueue(ctx, pool, "orders", []byte("2 chairs"))
	require.NoError(t, err)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), relayChildEnv+"="+schema, relayQueueEnv+"="+queue)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case got := <-line:
		require.Equal(t, "published "+id, got)
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the relay child did not publish within a minute")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())

	pub, err := amqpconsumer.NewPublisher(amqptest.Channel(t, conn), "")
	require.NoError(t, err)
	var published atomic.Int32
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		published.Add(1)
		return pub.Publish(ctx, m.ID, queue, m.Payload)
	}}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The dead relay's transaction holds the row until PostgreSQL sees its
	// connection gone and rolls it back; until then a relay skips the row.
	amqptest.Eventually(t, "the next relay publishes the row again", func() bool {
		n, err := relay.RunOnce(rctx)
		require.NoError(t, err)
		return n == 1
	})
	n, err := relay.RunOnce(rctx)
	require.NoError(t, err)
	assert.Zero(t, n, "marked sent")
	assert.Equal(t, 2, amqptest.Count(t, conn, queue), "RabbitMQ keeps both copies")

	var fx amqptest.Effects
	c, err := amqpconsumer.New(conn, queue, amqptest.Config(idempotency.NewRunner(store), func(ctx context.Context, m *consumer.Message) error {
		fx.Add(m.Key)
		return nil
	}))
	require.NoError(t, err)
	amqptest.Start(t, c)
	amqptest.Eventually(t, "both copies settled", func() bool { st := c.Stats(); return st.Executed+st.Duplicates == 2 })
	assert.Equal(t, 1, fx.Count(id))
	assert.Equal(t, uint64(1), c.Stats().Duplicates)
}

// Publish fails with ErrUnroutable when no queue takes the message.
func TestPublishUnroutable(t *testing.T) {
	conn := amqptest.Connect(t)
	pub, err := amqpconsumer.NewPublisher(amqptest.Channel(t, conn), "")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = pub.Publish(ctx, "id-1", amqptest.UniqueName("no-such-queue"), []byte("x"))
	require.ErrorIs(t, err, amqpconsumer.ErrUnroutable)
}
