package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// delivery is a delivery of the test's own broker: it records how it was
// settled.
type delivery struct {
	msg  *consumer.Message
	last bool

	mu      sync.Mutex
	settled string
	delay   time.Duration
	reason  string
	alive   int
	done    chan struct{}
	// onAck, if set, runs before an ack is recorded.
	onAck func()
}

func newDelivery(key string, n int, last bool) *delivery {
	return &delivery{msg: &consumer.Message{Key: key, Subject: "orders", Body: []byte("body of " + key), Delivery: n},
		last: last, done: make(chan struct{})}
}

func (d *delivery) Message() (*consumer.Message, error) {
	if d.msg.Key == "" {
		return nil, consumer.ErrNoKey
	}
	return d.msg, nil
}
func (d *delivery) settle(how string, delay time.Duration, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled != "" {
		panic("settled twice: " + d.settled + ", then " + how)
	}
	d.settled, d.delay, d.reason = how, delay, reason
	close(d.done)
	return nil
}
func (d *delivery) Ack(context.Context) error {
	if d.onAck != nil {
		d.onAck()
	}
	return d.settle("ack", 0, "")
}
func (d *delivery) Nak(_ context.Context, delay time.Duration) error {
	return d.settle("nak", delay, "")
}
func (d *delivery) Term(_ context.Context, reason string) error { return d.settle("term", 0, reason) }
func (d *delivery) InProgress(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.alive++
	return nil
}
func (d *delivery) Last() bool { return d.last }

// source hands out its deliveries, then waits for the context's end.
type source struct {
	mu sync.Mutex
	ds []*delivery
}

func (s *source) Fetch(ctx context.Context, n int, deliver func(consumer.Delivery)) error {
	s.mu.Lock()
	take := s.ds[:min(n, len(s.ds))]
	s.ds = s.ds[len(take):]
	s.mu.Unlock()
	for _, d := range take {
		deliver(d)
	}
	if len(take) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func newConsumer(t *testing.T, runner *idempotency.Runner, h consumer.Handler) *consumer.Consumer {
	t.Helper()
	c, err := consumer.New(consumer.Config{Runner: runner, Name: "ship", Handler: h,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	return c
}

// run runs c over ds until every delivery is settled.
func run(t *testing.T, c *consumer.Consumer, ds ...*delivery) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, &source{ds: ds}) }()
	for _, d := range ds {
		<-d.done
	}
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
}

// A transient failure is given back after a full-jitter backoff over the
// delivery count (here under the root's default cap), not run again here.
func TestTransientFailureNakedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConsumer(t, idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error {
			return errors.New("flaky")
		})
		d := newDelivery("k", 3, false)
		run(t, c, d)
		assert.Equal(t, "nak", d.settled)
		assert.Less(t, d.delay, 400*time.Millisecond, "full jitter under 100 ms x 2^2")
		assert.Equal(t, uint64(1), c.Stats().Retried)
	})
}

// The last delivery of a message whose key another execution holds is not
// given back: it is held for the hint and run again here.
func TestLastDeliveryInProgressHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil, idempotency.WithLease(time.Minute))
		c := newConsumer(t, runner, func(context.Context, *consumer.Message) error { return nil })
		release := make(chan struct{})
		held := make(chan struct{})
		go func() {
			_, _ = runner.Do(context.Background(), idempotency.Request{Caller: "ship", Key: "k",
				Fingerprint: idempotency.Fingerprint("MESSAGE", "orders", "", []byte("body of k"))},
				func(context.Context, *idempotency.Execution) ([]byte, error) {
					close(held)
					<-release
					return nil, nil
				})
		}()
		<-held
		d := newDelivery("k", 20, true)
		go func() {
			time.Sleep(3 * time.Second) // the other execution finishes after a few hints
			close(release)
		}()
		run(t, c, d)
		assert.Equal(t, "ack", d.settled)
		st := c.Stats()
		assert.Equal(t, uint64(1), st.Duplicates, "the other execution's outcome")
		assert.GreaterOrEqual(t, st.Held, uint64(1))
		assert.Zero(t, st.InProgress, "never given back")
	})
}

// A panicking handler parks its message, which is terminated.
func TestPanickingHandlerParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil)
		c := newConsumer(t, runner, func(context.Context, *consumer.Message) error { panic("nil map") })
		d := newDelivery("k", 1, false)
		run(t, c, d)
		assert.Equal(t, "term", d.settled)
		assert.Contains(t, d.reason, "handler panicked: nil map")
		parked, err := c.ListParked(context.Background(), "", 0)
		require.NoError(t, err)
		require.Len(t, parked, 1)
		assert.Contains(t, parked[0].Parked, "nil map")
	})
}

// A message without a key stops the consumer and is given back at once.
func TestNoKeyStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConsumer(t, idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error { return nil })
		d := newDelivery("", 1, false)
		err := c.Run(context.Background(), &source{ds: []*delivery{d}})
		require.ErrorIs(t, err, consumer.ErrNoKey)
		assert.Equal(t, "nak", d.settled)
		assert.Zero(t, d.delay)
	})
}

// A rejected message is terminated and nothing is stored; a message whose
// id came with another body is terminated without running.
func TestRejectedAndMismatchedTerminated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil)
		var runs atomic.Int32
		c := newConsumer(t, runner, func(_ context.Context, m *consumer.Message) error {
			runs.Add(1)
			if m.Key == "bad" {
				return idempotency.Reject(errors.New("no such product"))
			}
			return nil
		})
		bad, first := newDelivery("bad", 1, false), newDelivery("k", 1, false)
		run(t, c, bad, first)
		other := newDelivery("k", 1, false)
		other.msg.Body = []byte("another body")
		run(t, c, other)
		assert.Equal(t, "term", bad.settled)
		assert.Equal(t, "ack", first.settled)
		assert.Equal(t, "term", other.settled)
		assert.Equal(t, int32(2), runs.Load())
		_, err := runner.Store().Get(context.Background(), "ship", "bad")
		assert.ErrorIs(t, err, idempotency.ErrNotFound)
	})
}

// A slow handler's delivery is kept alive, and its lease renewed, while it runs.
func TestSlowHandlerKeptAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil, idempotency.WithLease(3*time.Second))
		c := newConsumer(t, runner, func(ctx context.Context, _ *consumer.Message) error {
			select {
			case <-time.After(10 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		d := newDelivery("k", 1, false)
		run(t, c, d)
		assert.Equal(t, "ack", d.settled)
		assert.GreaterOrEqual(t, d.alive, 9, "kept alive every second (a third of the lease)")
	})
}

// RetryParked parks the message again when the handler fails again.
func TestRetryParkedParksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil)
		var mended atomic.Bool
		c := newConsumer(t, runner, func(context.Context, *consumer.Message) error {
			if !mended.Load() {
				return retry.Permanent(errors.New("no such product"))
			}
			return nil
		})
		d := newDelivery("k", 1, false)
		run(t, c, d)
		require.Equal(t, "term", d.settled)
		err := c.RetryParked(context.Background(), "k")
		require.ErrorIs(t, err, idempotency.ErrParked)
		parked, err := c.ListParked(context.Background(), "", 0)
		require.NoError(t, err)
		require.Len(t, parked, 1)
		mended.Store(true)
		require.NoError(t, c.RetryParked(context.Background(), "k"))
		parked, err = c.ListParked(context.Background(), "", 0)
		require.NoError(t, err)
		assert.Empty(t, parked)
	})
}
