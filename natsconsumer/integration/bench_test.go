package integration_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// benchMessages is how many messages each consumer of one iteration of
// BenchmarkConsumerThroughput takes.
const benchMessages = 5000

// benchInFlight is how many messages every consumer benchmarked handles at once.
const benchInFlight = 64

// BenchmarkConsumerThroughput measures, in one run, how many messages a
// second a plain JetStream consumer (Consume, acking after a no-op
// handler, as many in flight as ours) takes, and how many ours takes with
// a no-op handler on the memory store and on each durable store, with
// their ratios to the plain one: what exactly-once costs. On a durable
// store ours runs unbatched (two commits per message: the claim, the
// outcome) and batched (the store's BatchStore: the claims of the
// messages taken together in one statement, their outcomes in one
// commit), and is compared with the plain consumer whose handler commits
// one row per message to the same database (plain+<db>): the database's
// commit rate bounds it. Beside them, the store's own limit for the
// batched work alone (batches of benchInFlight claims and completions,
// one batch at a time, no broker). Each consumer gets a fresh stream of
// benchMessages messages with Nats-Msg-Id set.
func BenchmarkConsumerThroughput(b *testing.B) {
	_, js := natstest.Connect(b)
	stores := []benchStore{postgresBench(b), mysqlBench(b), redisBench(b)}
	var plain, mem float64
	plainOne := make([]float64, len(stores))
	ours := make([]float64, len(stores))
	batched := make([]float64, len(stores))
	limit := make([]float64, len(stores))
	for i := 0; i < b.N; i++ {
		plain += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
			return plainConsumer(cons, done)
		})
		mem += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
			return oursConsumer(b, cons, idempotency.NewRunner(nil), done)
		})
		for j, st := range stores {
			plainOne[j] += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
				return plainConsumer(cons, func() {
					if err := st.writeOne(context.Background()); err != nil {
						b.Error(err)
					}
					done()
				})
			})
			ours[j] += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
				return oursConsumer(b, cons, idempotency.NewRunner(st.unbatched), done)
			})
			batched[j] += benchRun(b, js, func(cons jetstream.Consumer, done func()) func(context.Context) error {
				return oursConsumer(b, cons, idempotency.NewRunner(st.store), done)
			})
			b.StopTimer()
			limit[j] += batchLimit(b, st.store, i)
		}
	}
	n := float64(b.N)
	b.ReportMetric(plain/n, "plain-msgs/s")
	b.ReportMetric(mem/n, "ours-memory-msgs/s")
	b.ReportMetric(mem/plain, "memory/plain")
	for j, st := range stores {
		b.ReportMetric(plainOne[j]/n, "plain+"+st.name+"-row-msgs/s")
		b.ReportMetric(ours[j]/n, "ours-"+st.name+"-msgs/s")
		b.ReportMetric(batched[j]/n, "ours-"+st.name+"-batched-msgs/s")
		b.ReportMetric(limit[j]/n, st.name+"-batch-limit-msgs/s")
		b.ReportMetric(ours[j]/plain, st.name+"/plain")
		b.ReportMetric(ours[j]/plainOne[j], st.name+"/plain+row")
		b.ReportMetric(batched[j]/plain, st.name+"-batched/plain")
		b.ReportMetric(batched[j]/plainOne[j], st.name+"-batched/plain+row")
	}
	b.ReportMetric(0, "ns/op")
}

// benchRun publishes benchMessages messages to a fresh stream, runs the
// consumer that mk makes until it handled them all, and returns its rate.
func benchRun(b *testing.B, js jetstream.JetStream, mk func(jetstream.Consumer, func()) func(context.Context) error) float64 {
	b.Helper()
	b.StopTimer()
	stream := natstest.NewStream(b, js)
	ctx := context.Background()
	var futures []jetstream.PubAckFuture
	for i := range benchMessages {
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: stream + ".orders", Data: []byte(natstest.BodyOf(i)), Header: nats.Header{}},
			jetstream.WithMsgID(natstest.KeyOf(i)))
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
	cons := natstest.NewPullConsumer(b, js, stream, jetstream.ConsumerConfig{MaxAckPending: 4 * benchInFlight})
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
	cfg := natstest.Config(runner, func(context.Context, *consumer.Message) error {
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
