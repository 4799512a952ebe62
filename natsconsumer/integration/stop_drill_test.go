package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/internal/drill"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// The stop drill's settings.
const (
	drillMessages   = 2000
	drillChildren   = 2
	drillOutageAt   = drillMessages * 3 / 10 // effects before the dependency goes down
	drillGrace      = 3 * time.Second        // the children's StopGrace
	drillLease      = 2 * time.Second
	drillAckWait    = 2 * time.Second
	drillMaxDeliver = 2 // the second delivery is the broker's last
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
// JetStream consumer without a MaxDeliver as the quick start sets it up,
// and on one with a MaxDeliver of 2, whose last deliveries the stopping
// consumers hand to the store for the new one's Reconciler.
func TestStopDuringAnOutageLosesNothing(t *testing.T) {
	stop := func(children []*drill.Process) {
		for i, took := range drill.StopAll(t, children) {
			t.Logf("child %d stopped in %v (StopGrace %v): %s", i, took.Round(time.Millisecond), drillGrace, children[i].Last)
			assert.LessOrEqual(t, took, drillStopBound, "child %d's stop", i)
		}
	}
	t.Run("no MaxDeliver", func(t *testing.T) { stopDrill(t, 0, stop) })
	t.Run("MaxDeliver", func(t *testing.T) { stopDrill(t, drillMaxDeliver, stop) })
}

// The same consumer processes SIGKILLed during the outage, on a JetStream
// consumer without a MaxDeliver as the quick start sets it up, holding
// deliveries and running handlers, some on the delivery that reaches
// their MaxDeliveries: JetStream delivers everything they held again, and
// the new consumer finishes it.
func TestKilledDuringAnOutageLosesNothing(t *testing.T) {
	stopDrill(t, 0, func(children []*drill.Process) {
		for _, c := range children {
			c.Kill()
		}
	})
}

// stopDrill runs the drill on a JetStream consumer with the MaxDeliver
// maxDeliver (0 for none), ending the children with end while their
// dependency is down.
func stopDrill(t *testing.T, maxDeliver int, end func([]*drill.Process)) {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{MaxDeliver: maxDeliver, AckWait: drillAckWait})
	store, pool, schema := newOutbox(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, "effects"}.Sanitize()+" (key text NOT NULL)")
	require.NoError(t, err)
	for i := range drillMessages {
		natstest.Publish(t, js, stream+".orders", drillKey(i), "order "+drillKey(i))
	}
	dep := drill.NewDependency(t)

	var children []*drill.Process
	for range drillChildren {
		children = append(children, startDrillChild(t, schema, stream, dep.URL()))
	}
	natstest.Eventually(t, "the children performed effects", func() bool { return drill.CountEffects(t, pool, schema).All >= drillOutageAt })
	dep.SetDown(true)
	for _, c := range children {
		c.Await(t, drill.LineOutage)
	}
	end(children)
	before := drill.CountEffects(t, pool, schema)
	dep.SetDown(false)

	budget := retry.NewBudget(0.1, 1, 20)
	runner := idempotency.NewRunner(store, idempotency.WithLease(drillLease))
	c, err := natsconsumer.New(cons, drillConfig(runner, drill.Handler(schema, dep.URL(), budget), budget))
	require.NoError(t, err)
	natstest.Start(t, c)
	parked := drill.AwaitEffects(t, drill.Await{Consumer: c.Consumer, Store: store, Pool: pool, Schema: schema, Keys: drillKeys(),
		Broker: func() string {
			i := natstest.Info(t, cons)
			return fmt.Sprintf("%d pending, %d waiting for an ack; ", i.NumPending, i.NumAckPending)
		},
		Settled: func() bool {
			i := natstest.Info(t, cons)
			return i.NumPending == 0 && i.NumAckPending == 0
		}})
	after := drill.CountEffects(t, pool, schema)
	t.Logf("effects before the stop's end %d; then the new consumer: %+v, parked %d", before.All, c.Stats(), parked)
	assert.Zero(t, parked, "left parked")
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

// startDrillChild starts a child consumer process (see drill.StartProcess).
func startDrillChild(t *testing.T, schema, stream, depURL string) *drill.Process {
	return drill.StartProcess(t, func(string) []string {
		return []string{drillChildEnv + "=" + schema, drillStreamEnv + "=" + stream, drillDependencyEnv + "=" + depURL}
	})
}
