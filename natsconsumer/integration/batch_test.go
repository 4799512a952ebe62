package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// countingPG is pgstore counting its batch claims.
type countingPG struct {
	*pgstore.Store
	batches, claimed atomic.Int64
}

func (s *countingPG) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	s.batches.Add(1)
	s.claimed.Add(int64(len(reqs)))
	return s.Store.ClaimBatch(ctx, reqs)
}

// On PostgreSQL the consumer claims the messages it takes together and
// commits their outcomes together, each handler's local write in a
// savepoint of its own: a handler that fails after writing (or one of
// whose statements the server failed) loses only its own write, and is run again on its
// redelivery; every message's write is committed once, with its outcome.
func TestBatchedLocalWritesOncePerMessage(t *testing.T) {
	_, js := natstest.Connect(t)
	pg, pool, schema := newOutbox(t)
	store := &countingPG{Store: pg}
	ctx := context.Background()
	table := pgx.Identifier{schema, "shipments"}.Sanitize()
	_, err := pool.Exec(ctx, "CREATE TABLE "+table+" (order_id text PRIMARY KEY)")
	require.NoError(t, err)
	stream := natstest.NewStream(t, js)
	const n = 300
	for i := range n {
		natstest.Publish(t, js, stream+".orders", natstest.KeyOf(i), natstest.BodyOf(i))
	}
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{})
	var failedAfterWrite, failedStatement atomic.Int64
	c, err := natsconsumer.New(cons, natstest.Config(idempotency.NewRunner(store), func(ctx context.Context, m *consumer.Message) error {
		tx, ok := pgstore.TxFrom(ctx)
		if !ok {
			return errors.New("no transaction")
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", m.Key); err != nil {
			return err
		}
		var i int
		_, _ = fmt.Sscanf(m.Key, "order-%d", &i)
		switch {
		case m.Delivery == 1 && i%10 == 3:
			failedAfterWrite.Add(1)
			return errors.New("the warehouse answered 503 after the write")
		case m.Delivery == 1 && i%10 == 7:
			failedStatement.Add(1)
			// A statement the server fails transiently (a serialization
			// failure): the transaction may not commit.
			_, err := tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$")
			return err
		}
		return nil
	}))
	require.NoError(t, err)
	natstest.Start(t, c)
	natstest.Eventually(t, "every message handled", func() bool { return natstest.Settled(t, cons) && c.Stats().Executed == n })

	var rows, distinct int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT order_id) FROM "+table).Scan(&rows, &distinct))
	assert.Equal(t, n, rows, "writes committed")
	assert.Equal(t, n, distinct)
	for i := range n {
		rec, err := store.Get(ctx, c.Caller(), natstest.KeyOf(i))
		require.NoError(t, err, natstest.KeyOf(i))
		assert.Equal(t, idempotency.StateCompleted, rec.State, natstest.KeyOf(i))
	}
	assert.EqualValues(t, n/10, failedAfterWrite.Load())
	assert.EqualValues(t, n/10, failedStatement.Load())
	assert.Less(t, store.batches.Load(), int64(n/2), "claims in batches (%d claimed in %d)", store.claimed.Load(), store.batches.Load())
}
