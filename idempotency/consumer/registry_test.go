package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// A new Consumer of a name takes the name over on the Runner from one
// whose Run ended, and RetryParked then runs the new one's handler; while
// a Consumer of the name runs, New refuses, and a replaced Consumer runs
// no more.
func TestNewConsumerFollowsOneThatStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil)
		cfg := consumer.Config{Runner: runner, Name: "ship", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Handler: func(context.Context, *consumer.Message) error {
				return retry.Permanent(errors.New("no such product"))
			}}
		first, err := consumer.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		src := &source{ds: []*delivery{newDelivery("k", 1, false)}}
		errc := make(chan error, 1)
		go func() { errc <- first.Run(ctx, src) }()
		synctest.Wait()
		_, err = consumer.New(cfg)
		require.Error(t, err, "another Consumer of the name runs")
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)

		var ran string
		cfg.Handler = func(_ context.Context, m *consumer.Message) error {
			ran = "second: " + string(m.Body)
			return nil
		}
		second, err := consumer.New(cfg)
		require.NoError(t, err, "the first Consumer's Run ended")
		require.NoError(t, second.RetryParked(context.Background(), "k"))
		assert.Equal(t, "second: body of k", ran)
		assert.ErrorIs(t, first.Run(context.Background(), &source{}), consumer.ErrReplaced)

		_, err = consumer.New(consumer.Config{Runner: runner, Name: "other", Handler: cfg.Handler})
		require.NoError(t, err)
		runner.Register("jobs", func(context.Context, *idempotency.Execution) ([]byte, error) { return nil, nil })
		_, err = consumer.New(consumer.Config{Runner: runner, Name: "jobs", Handler: cfg.Handler})
		require.Error(t, err, "a name registered otherwise")
	})
}
