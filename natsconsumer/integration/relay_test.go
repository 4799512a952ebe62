package integration_test

import (
	"bufio"
	"context"
	"errors"
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
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// Environment of the relay child process.
const (
	relayChildEnv  = "EXACTLYONCE_TEST_RELAY_SCHEMA"
	relayStreamEnv = "EXACTLYONCE_TEST_RELAY_STREAM"
)

// pgDSN is the PostgreSQL server of the outbox tests.
func pgDSN() string {
	if dsn := os.Getenv("EXACTLYONCE_PG_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// newOutbox migrates a schema of its own for the test, dropped at its end.
func newOutbox(t testing.TB) (*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc, err := pgxpool.ParseConfig(pgDSN())
	require.NoError(t, err)
	pc.MaxConns = 32 // BenchmarkConsumerThroughput has 64 messages in flight
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	require.NoError(t, err)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		t.Fatalf("the outbox tests need PostgreSQL at %s (EXACTLYONCE_PG_DSN): %v\nstart it (on Debian: pg_ctlcluster VERSION main start)", pgDSN(), err)
	}
	schema := strings.ToLower(natstest.UniqueName("eo_nats"))
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
// which says "published" after publishing its message and then hangs
// before marking it sent, until it is killed.
func relayChild(schema, stream string) int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgDSN())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nc, err := nats.Connect(natstest.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		if err := natsconsumer.Publish(ctx, js, m.ID, stream+"."+m.Topic, m.Payload); err != nil {
			return err
		}
		fmt.Println("published", m.ID)
		select {} // killed here, before the row is marked sent
	}}
	_, err = relay.RunOnce(ctx)
	fmt.Fprintln(os.Stderr, "relay returned:", err)
	return 1
}

// A relay killed (SIGKILL) between publishing an outbox row and marking it
// sent leaves the row unsent; the next relay publishes it again, the
// stream drops the repeat (Nats-Msg-Id = the row's id), and the consumer,
// keyed by the same id, handles it once, committing its own write in the
// store's transaction.
func TestOutboxRelayKilledBetweenPublishAndMark(t *testing.T) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	store, pool, schema := newOutbox(t)
	ctx := context.Background()
	id, err := store.Enqueue(ctx, pool, "orders", []byte("2 chairs"))
	require.NoError(t, err)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), relayChildEnv+"="+schema, relayStreamEnv+"="+stream)
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

	// The next relay finds the row unsent and publishes it again.
	var published atomic.Int32
	relay := &pgstore.Relay{Store: store, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		published.Add(1)
		return natsconsumer.Publish(ctx, js, m.ID, stream+"."+m.Topic, m.Payload)
	}}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The dead relay's transaction holds the row until PostgreSQL sees its
	// connection gone and rolls it back; until then a relay skips the row.
	natstest.Eventually(t, "the next relay publishes the row again", func() bool {
		n, err := relay.RunOnce(rctx)
		require.NoError(t, err)
		return n == 1
	})
	assert.Equal(t, int32(1), published.Load())
	n, err := relay.RunOnce(rctx)
	require.NoError(t, err)
	assert.Zero(t, n, "marked sent")
	si, err := js.Stream(rctx, stream)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), si.CachedInfo().State.Msgs, "the repeat collapsed at the stream")

	// The consumer handles it once, its write committed with the outcome.
	_, err = pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, "shipments"}.Sanitize()+" (order_id text PRIMARY KEY, body text)")
	require.NoError(t, err)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	c, err := natsconsumer.New(cons, natstest.Config(idempotency.NewRunner(store), func(ctx context.Context, m *consumer.Message) error {
		tx, ok := pgstore.TxFrom(ctx)
		if !ok {
			return errors.New("no transaction")
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "shipments"}.Sanitize()+" VALUES ($1, $2)", m.Key, string(m.Body))
		return err
	}))
	require.NoError(t, err)
	natstest.Start(t, c)
	natstest.Eventually(t, "the message handled", func() bool { return natstest.Settled(t, cons) && c.Stats().Executed == 1 })
	var count int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "shipments"}.Sanitize()+" WHERE order_id = $1", id).Scan(&count))
	assert.Equal(t, 1, count)
}
