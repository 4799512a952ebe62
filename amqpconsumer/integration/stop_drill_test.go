package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
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
	stop := func(children []*drillProcess) {
		for i, took := range stopAll(t, children) {
			t.Logf("child %d stopped in %v (StopGrace %v): %s", i, took.Round(time.Millisecond), drillGrace, children[i].last)
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
	stopDrill(t, 0, func(children []*drillProcess) {
		for _, c := range children {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
}

// stopDrill runs the drill on a queue with the delivery limit limit (0
// for none), ending the children with end while their dependency is down.
func stopDrill(t *testing.T, limit int, end func([]*drillProcess)) {
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

	var children []*drillProcess
	for range drillChildren {
		children = append(children, startDrillChild(t, schema, queue, dep.URL(), limit))
	}
	amqptest.Eventually(t, "the children performed effects", func() bool { return countEffects(t, pool, schema).all >= drillOutageAt })
	dep.SetDown(true)
	for _, c := range children {
		c.await(t, lineOutage)
	}
	end(children)
	before := countEffects(t, pool, schema)
	dep.SetDown(false)

	budget := retry.DefaultBudget()
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
	parked := awaitEffects(t, c.Consumer, store, pool, schema, func() string {
		select {
		case err := <-ran:
			ran <- err
			return fmt.Sprintf("the new consumer's Run returned %v; ", err)
		default:
		}
		return fmt.Sprintf("%d ready in the queue, %d dead-lettered %v; ", amqptest.Count(t, conn, queue), amqptest.Count(t, conn, dlq), amqptest.DeadLetters(t, conn, dlq))
	}, func() bool { return amqptest.Count(t, conn, queue) == 0 }, filepath.Join(children[0].dir, "*.log"), filepath.Join(children[1].dir, "*.log"),
		filepath.Join(logs, "*.log"))
	after := countEffects(t, pool, schema)
	t.Logf("effects before the stop's end %d; then the new consumer: %+v, parked %d, dead-lettered %d",
		before.all, c.Stats(), parked, amqptest.Count(t, conn, dlq))
	assert.Zero(t, parked, "left parked")
	if limit == 0 {
		assert.Zero(t, amqptest.Count(t, conn, dlq), "dead-lettered without a limit")
	}
	assert.Equal(t, drillMessages, after.distinct, "lost")
	assert.Equal(t, drillMessages, after.all, "duplicated: %v", after.doubled)
}

func drillKey(i int) string { return fmt.Sprintf("order-%04d", i) }

// drillProcess is a child process of the drill and the lines it printed.
type drillProcess struct {
	cmd   *exec.Cmd
	lines chan string
	last  string // the last line read
	dir   string // where its log is
}

// startDrillChild starts a child consumer process, killed at the end of
// the test if it still runs, and waits for it to run.
func startDrillChild(t *testing.T, schema, queue, depURL string, limit int) *drillProcess {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	dir := t.TempDir()
	log, err := os.CreateTemp(dir, "child-*.log")
	require.NoError(t, err)
	require.NoError(t, log.Close())
	cmd.Env = append(os.Environ(), drillChildEnv+"="+schema, drillQueueEnv+"="+queue, drillDependencyEnv+"="+depURL, drillLogEnv+"="+log.Name(),
		drillLimitEnv+"="+strconv.Itoa(limit),
		// Under -race a process sleeps a second at its exit unless told not to.
		"GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &drillProcess{cmd: cmd, lines: make(chan string, 16), dir: dir}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	p.await(t, lineRunning)
	return p
}

// await waits for the child to print a line starting with prefix.
func (p *drillProcess) await(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the drill child ended without printing %q", prefix)
			}
			p.last = l
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("the drill child did not print %q within a minute", prefix)
		}
	}
}

// stopAll sends SIGTERM to every child at once, and returns how long each
// took to exit, which it must do cleanly having printed lineStopped.
func stopAll(t *testing.T, children []*drillProcess) []time.Duration {
	took := make([]time.Duration, len(children))
	stopped := make([]bool, len(children))
	done := make(chan struct{}, len(children))
	for i, c := range children {
		go func() {
			defer func() { done <- struct{}{} }()
			begin := time.Now()
			if c.cmd.Process.Signal(syscall.SIGTERM) != nil {
				return
			}
			for l := range c.lines { // until its stdout closes: it exited
				c.last = l
				stopped[i] = stopped[i] || strings.HasPrefix(l, lineStopped)
			}
			_ = c.cmd.Wait()
			took[i] = time.Since(begin)
		}()
	}
	for range children {
		<-done
	}
	for i, c := range children {
		require.True(t, stopped[i] && c.cmd.ProcessState != nil && c.cmd.ProcessState.Success(),
			"child %d exited with %v, its last line %q", i, c.cmd.ProcessState, c.last)
	}
	return took
}

// parkedNow returns how many of c's messages are parked.
func parkedNow(t *testing.T, c *consumer.Consumer) int {
	t.Helper()
	recs, err := c.ListParked(context.Background(), "", 0)
	require.NoError(t, err)
	return len(recs)
}

// effectCount is what the effects table holds.
type effectCount struct {
	all, distinct int
	doubled       []string // keys with more than one effect
	keys          map[string]bool
}

// awaitEffects waits until every drill message has its effect and the
// broker is settled (nobody runs a parked message meanwhile), and returns
// how many messages are parked then; after two minutes it fails the test with what
// became of the messages without an effect (and what broker says).
func awaitEffects(t *testing.T, c *consumer.Consumer, store idempotency.Store, pool *pgxpool.Pool, schema string, broker func() string, settled func() bool, logs ...string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	parked := 0
	for range tick.C {
		parked = parkedNow(t, c)
		n := countEffects(t, pool, schema)
		if n.distinct == drillMessages && settled() {
			return parked
		}
		if time.Now().Before(deadline) {
			continue
		}
		var missing []string
		for i := range drillMessages {
			if key := drillKey(i); !n.keys[key] {
				missing = append(missing, key)
			}
		}
		report := fmt.Sprintf("%d effects for %d of %d messages; %sthe new consumer %+v; without an effect (%d):",
			n.all, n.distinct, drillMessages, broker(), c.Stats(), len(missing))
		for _, key := range missing[:min(len(missing), 10)] {
			rec, err := store.Get(context.Background(), c.Caller(), key)
			report += fmt.Sprintf("\n  %s: %+v %v", key, rec, err)
			report += logLines(logs, key)
		}
		t.Fatal(report)
	}
	return parked
}

func countEffects(t *testing.T, pool *pgxpool.Pool, schema string) effectCount {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT key, count(*) FROM "+pgx.Identifier{schema, "effects"}.Sanitize()+" GROUP BY key")
	require.NoError(t, err)
	defer rows.Close()
	n := effectCount{keys: make(map[string]bool)}
	for rows.Next() {
		var (
			key string
			k   int
		)
		require.NoError(t, rows.Scan(&key, &k))
		n.all += k
		n.distinct++
		n.keys[key] = true
		if k > 1 {
			n.doubled = append(n.doubled, key)
		}
	}
	require.NoError(t, rows.Err())
	return n
}

// logLines returns the lines of the logs (glob patterns) that name key.
func logLines(patterns []string, key string) string {
	var out string
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "key="+key+" ") {
					out += "\n    " + filepath.Base(f) + ": " + l
				}
			}
		}
	}
	return out
}
