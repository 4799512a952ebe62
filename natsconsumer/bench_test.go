package natsconsumer_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
)

// benchMessages is how many messages each consumer of one iteration of
// BenchmarkConsumerThroughput takes.
const benchMessages = 5000

// benchInFlight is how many messages every consumer benchmarked handles at once.
const benchInFlight = 64

// BenchmarkConsumerThroughput measures, in one run, how many messages a
// second a plain JetStream consumer (Consume, acking after a no-op
// handler, as many in flight as ours) takes, and how many ours takes with
// a no-op handler on the memory store and on PostgreSQL (pgstore), with
// their ratios to the plain one: what exactly-once costs. Ours on
// PostgreSQL commits twice per message (the claim, the outcome), so it is
// also compared with the plain consumer whose handler commits one row per
// message (plain+insert): the database's commit rate bounds both. Each
// consumer gets a fresh stream of benchMessages messages with Nats-Msg-Id
// set.
func BenchmarkConsumerThroughput(b *testing.B) {
	_, js := connect(b)
	store, pool, schema := newOutbox(b)
	table := pgx.Identifier{schema, "handled"}.Sanitize()
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+table+" (id bigserial PRIMARY KEY, at timestamptz DEFAULT now())"); err != nil {
		b.Fatal(err)
	}
	var plain, plainPG, mem, pg, pgBatched, pgLimit float64
	for i := 0; i < b.N; i++ {
		plain += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
			return plainConsumer(cons, done)
		})
		plainPG += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
			return plainConsumer(cons, func() {
				if _, err := pool.Exec(context.Background(), "INSERT INTO "+table+" DEFAULT VALUES"); err != nil {
					b.Error(err)
				}
				done()
			})
		})
		mem += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
			return oursConsumer(b, cons, idempotency.NewRunner(nil), done)
		})
		pg += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
			return oursConsumer(b, cons, idempotency.NewRunner(unbatched{store}), done)
		})
		b.StopTimer()
		pgLimit += batchLimit(b, store, i)
		pgBatched += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
			return oursConsumer(b, cons, idempotency.NewRunner(store), done)
		})
	}
	n := float64(b.N)
	b.ReportMetric(plain/n, "plain-msgs/s")
	b.ReportMetric(plainPG/n, "plain+insert-msgs/s")
	b.ReportMetric(mem/n, "ours-memory-msgs/s")
	b.ReportMetric(pg/n, "ours-pgstore-msgs/s")
	b.ReportMetric(mem/plain, "memory/plain")
	b.ReportMetric(pg/plain, "pgstore/plain")
	b.ReportMetric(pg/plainPG, "pgstore/plain+insert")
	b.ReportMetric(pgBatched/n, "ours-pgstore-batched-msgs/s")
	b.ReportMetric(pgLimit/n, "pgstore-batch-limit-msgs/s")
	b.ReportMetric(pgBatched/plain, "pgstore-batched/plain")
	b.ReportMetric(pgBatched/plainPG, "pgstore-batched/plain+insert")
	b.ReportMetric(0, "ns/op")
}

// unbatched is a TxStore that hides the store's batches: ours as it was
// before them, two commits per message.
type unbatched struct{ idempotency.TxStore }

// benchRun publishes benchMessages messages to a fresh stream, runs the
// consumer that mk makes until it handled them all, and returns its rate.
func benchRun(b *testing.B, js jetstream.JetStream, mk func(jetstream.Consumer, func()) func(context.Context) error) float64 {
	b.Helper()
	b.StopTimer()
	stream := newStream(b, js)
	ctx := context.Background()
	var futures []jetstream.PubAckFuture
	for i := range benchMessages {
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: stream + ".orders", Data: []byte(bodyOf(i)), Header: nats.Header{}},
			jetstream.WithMsgID(keyOf(i)))
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	cons := newPullConsumer(b, js, stream, jetstream.ConsumerConfig{MaxAckPending: 4 * benchInFlight})
	var handled atomic.Int64
	all := make(chan struct{})
	run := mk(cons, func() {
		if handled.Add(1) == benchMessages {
			close(all)
		}
	})
	rctx, cancel := context.WithCancel(ctx)
	b.StartTimer()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- run(rctx) }()
	<-all
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-errc
	return benchMessages / elapsed.Seconds()
}

// oursConsumer is natsconsumer with a no-op handler.
func oursConsumer(b *testing.B, cons jetstream.Consumer, runner *idempotency.Runner, done func()) func(context.Context) error {
	cfg := config(runner, func(context.Context, *consumer.Message) error {
		done()
		return nil
	})
	cfg.MaxInFlight = benchInFlight
	c, err := natsconsumer.New(cons, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c.Run
}

// plainConsumer is the plain JetStream consumer as the client's
// documentation shows it: Consume with a buffer of benchInFlight
// messages, a goroutine per message (at most benchInFlight at once)
// running a no-op handler, then an ack.
func plainConsumer(cons jetstream.Consumer, done func()) func(context.Context) error {
	return func(ctx context.Context) error {
		var wg sync.WaitGroup
		slots := make(chan struct{}, benchInFlight)
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				done()
				_ = msg.Ack()
			})
		}, jetstream.PullMaxMessages(benchInFlight))
		if err != nil {
			return err
		}
		<-ctx.Done()
		cc.Stop()
		<-cc.Closed()
		wg.Wait()
		return ctx.Err()
	}
}
