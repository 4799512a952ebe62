package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/internal/drill"
)

// The stop drill's settings.
const (
	drillMessages = 2000
	drillChildren = 2
	drillOutageAt = drillMessages * 3 / 10 // effects before the dependency goes down
	drillGrace    = 3 * time.Second        // the children's StopGrace
	drillLease    = 2 * time.Second
	// drillDeliveryLimit is the queue's x-delivery-limit: the second
	// delivery is the last.
	drillDeliveryLimit = 1
	// drillMaxDeliveries is the consumers' own limit: a message is parked
	// when its second delivery fails.
	drillMaxDeliveries = 2
	// drillStopBound bounds a child's stop, SIGTERM to exit: the grace
	// period, and as much again for settling what it holds and exiting on
	// a loaded machine.
	drillStopBound = 2 * drillGrace
)

// Two consumer processes, SIGTERMed while their handlers' dependency is
// down (half its calls fail, half hang), stop within their grace period;
// a new consumer finishes the rest, without anyone running a parked
// message: every one of 2,000 messages has its effect once. The consumers
// count deliveries themselves (consumer.Config.MaxDeliveries 2), on a
// queue without a delivery limit as the quick start sets it up (nothing
// is dead-lettered), and on one with a limit of 1 (two deliveries), whose
// last deliveries the stopping consumers hand to the store for the new
// one's Reconciler.
func TestStopDuringAnOutageLosesNothing(t *testing.T) {
	stop := func(children []*drill.Process) {
		for i, took := range drill.StopAll(t, children) {
			t.Logf("child %d stopped in %v (StopGrace %v): %s", i, took.Round(time.Millisecond), drillGrace, children[i].Last)
			assert.LessOrEqual(t, took, drillStopBound, "child %d's stop", i)
		}
	}
	t.Run("no delivery limit", func(t *testing.T) { stopDrill(t, 0, stop) })
	t.Run("delivery limit", func(t *testing.T) { stopDrill(t, drillDeliveryLimit, stop) })
}

// The same consumer processes SIGKILLed during the outage, on a queue
// without a delivery limit as the quick start sets it up, holding
// deliveries and running handlers, some on the delivery that reaches
// their MaxDeliveries: the queue delivers everything they held again, and
// the new consumer finishes it, nothing dead-lettered.
func TestKilledDuringAnOutageLosesNothing(t *testing.T) {
	stopDrill(t, 0, func(children []*drill.Process) {
		for _, c := range children {
			c.Kill()
		}
	})
}

// stopDrill runs the drill on a queue with the delivery limit limit (0
// for none), ending the children with end while their dependency is down.
func stopDrill(t *testing.T, limit int, end func([]*drill.Process)) {
	conn := amqptest.Connect(t)
	queue, dlq := amqptest.NewQueue(t, conn, limit)
	ch := amqptest.Channel(t, conn)
	store, pool, schema := newOutbox(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, "effects"}.Sanitize()+" (key text NOT NULL)")
	require.NoError(t, err)
	for i := range drillMessages {
		amqptest.Publish(t, ch, queue, drillKey(i), "order "+drillKey(i))
	}
	dep := drill.NewDependency(t)

	var children []*drill.Process
	for range drillChildren {
		children = append(children, startDrillChild(t, schema, queue, dep.URL(), limit))
	}
	amqptest.Eventually(t, "the children performed effects", func() bool { return drill.CountEffects(t, pool, schema).All >= drillOutageAt })
	dep.SetDown(true)
	for _, c := range children {
		c.Await(t, drill.LineOutage)
	}
	end(children)
	before := drill.CountEffects(t, pool, schema)
	dep.SetDown(false)

	budget := retry.NewBudget(0.1, 1, 20)
	runner := idempotency.NewRunner(store, idempotency.WithLease(drillLease))
	logs := t.TempDir()
	newLog, err := os.Create(filepath.Join(logs, "new.log"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = newLog.Close() })
	c, err := amqpconsumer.New(amqptest.Connect(t), queue, drillConfig(runner, drill.Handler(schema, dep.URL(), budget), budget, drillLogger(newLog)),
		amqpconsumer.WithDeliveryLimit(limit))
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(t.Context()) }()
	t.Cleanup(func() { require.ErrorIs(t, <-ran, context.Canceled) })
	parked := drill.AwaitEffects(t, drill.Await{Consumer: c.Consumer, Store: store, Pool: pool, Schema: schema, Keys: drillKeys(),
		Broker: func() string {
			select {
			case err := <-ran:
				ran <- err
				return fmt.Sprintf("the new consumer's Run returned %v; ", err)
			default:
			}
			return fmt.Sprintf("%d ready in the queue, %d dead-lettered %v; ", amqptest.Count(t, conn, queue), amqptest.Count(t, conn, dlq), amqptest.DeadLetters(t, conn, dlq))
		},
		Settled: func() bool { return amqptest.Count(t, conn, queue) == 0 },
		Logs:    []string{filepath.Join(children[0].Dir, "*.log"), filepath.Join(children[1].Dir, "*.log"), filepath.Join(logs, "*.log")}})
	after := drill.CountEffects(t, pool, schema)
	t.Logf("effects before the stop's end %d; then the new consumer: %+v, parked %d, dead-lettered %d",
		before.All, c.Stats(), parked, amqptest.Count(t, conn, dlq))
	assert.Zero(t, parked, "left parked")
	if limit == 0 {
		assert.Zero(t, amqptest.Count(t, conn, dlq), "dead-lettered without a limit")
	}
	assert.Equal(t, drillMessages, after.Distinct, "lost")
	assert.Equal(t, drillMessages, after.All, "duplicated: %v", after.Doubled)
}

func drillKey(i int) string { return fmt.Sprintf("order-%04d", i) }

// drillKeys are the keys of the drill's messages.
func drillKeys() []string {
	keys := make([]string, drillMessages)
	for i := range keys {
		keys[i] = drillKey(i)
	}
	return keys
}

// startDrillChild starts a child consumer process (see drill.StartProcess)
// on a queue with the delivery limit limit, logging to a file in its Dir.
func startDrillChild(t *testing.T, schema, queue, depURL string, limit int) *drill.Process {
	return drill.StartProcess(t, func(dir string) []string {
		return []string{drillChildEnv + "=" + schema, drillQueueEnv + "=" + queue, drillDependencyEnv + "=" + depURL,
			drillLogEnv + "=" + filepath.Join(dir, "child.log"), drillLimitEnv + "=" + strconv.Itoa(limit)}
	})
}
