package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// A consumer that dies mid-handler (here: its handler never returns and
// nothing renews its lease) leaves its message to the next delivery
// within consumer.DefaultLease, with a Runner of the default, one-minute
// lease: the consumer claims with a short lease and renews it while the
// handler runs.
func TestADeadConsumersMessageIsTakenOverWithinItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := idempotency.NewMemoryStore(nil)
		dead := make(chan struct{})
		var effects atomic.Int32
		a, err := consumer.New(consumer.Config{Runner: idempotency.NewRunner(store), Name: "ship",
			Clock:  clock.NewMock(), // stopped: no keep-alive, as after a kill
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Handler: func(context.Context, *consumer.Message) error {
				<-dead // the process is killed here
				return nil
			}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- a.Run(ctx, &source{ds: []*delivery{newDelivery("k", 1, false)}}) }()
		synctest.Wait()

		time.Sleep(consumer.DefaultLease + time.Second) // the broker redelivers
		b := newConsumer(t, idempotency.NewRunner(store), func(context.Context, *consumer.Message) error {
			effects.Add(1)
			return nil
		})
		again := newDelivery("k", 2, false)
		run(t, b, again)
		assert.Equal(t, "ack", again.settled, "taken over, not given back as in progress")
		assert.Equal(t, int32(1), effects.Load())

		close(dead)
		cancel()
		<-errc
	})
}
