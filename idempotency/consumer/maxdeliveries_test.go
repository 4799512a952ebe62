package consumer_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// The consumer counts deliveries itself: on a broker without a delivery
// limit, the delivery of a failing message that reaches
// Config.MaxDeliveries (the default 20 here) parks it with its reason and
// terminates it; the ones before are given back.
func TestMaxDeliveriesParksAFailingMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConsumer(t, idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error {
			return errors.New("flaky")
		})
		before := newDelivery("k", consumer.DefaultMaxDeliveries-1, false)
		run(t, c, before)
		assert.Equal(t, "nak", before.settled, "a delivery below the limit")

		reached := newDelivery("k", consumer.DefaultMaxDeliveries, false)
		run(t, c, reached)
		assert.Equal(t, "term", reached.settled, "the delivery that reached the limit")
		assert.Contains(t, reached.reason, "MaxDeliveries")
		parked, err := c.ListParked(context.Background(), "", 0)
		require.NoError(t, err)
		require.Len(t, parked, 1)
		assert.Equal(t, "k", parked[0].Key)
		assert.Contains(t, parked[0].Parked, "flaky")
		assert.Equal(t, uint64(1), c.Stats().Parked)
	})
}
