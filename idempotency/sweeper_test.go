package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

type sweep struct {
	removed int
	err     error
}

func TestSweeperRemovesExpiredRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for i := range 5 {
		_, err := e.runner.Do(ctx, req(fmt.Sprint("k", i)), func(context.Context, *idempotency.Execution) ([]byte, error) {
			return []byte("x"), nil
		})
		require.NoError(t, err)
	}
	sweeps := make(chan sweep, 10)
	s := idempotency.StartSweeper(e.store, idempotency.SweeperConfig{
		Interval: time.Hour, Batch: 2, Clock: e.clock,
		OnSweep: func(n int, err error) { sweeps <- sweep{n, err} },
	})
	defer s.Stop()

	e.clock.Add(time.Hour)
	assert.Equal(t, sweep{0, nil}, <-sweeps, "nothing expired yet")
	require.Equal(t, 5, e.store.Len())

	total := 0
	for range int(testTTL / time.Hour) {
		e.clock.Add(time.Hour) // one tick, then wait for its sweep
		got := <-sweeps
		require.NoError(t, got.err)
		total += got.removed
	}
	assert.Equal(t, 5, total, "every expired record is removed, in batches of 2")
	assert.Zero(t, e.store.Len())
	s.Stop()
	s.Stop() // idempotent
}

// slowStore blocks DeleteExpired until its context ends.
type slowStore struct {
	idempotency.Store
	entered chan struct{}
}

func (s slowStore) DeleteExpired(ctx context.Context, _ int) (int, error) {
	close(s.entered)
	<-ctx.Done()
	return 0, ctx.Err()
}

func TestSweeperStopCancelsSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store := slowStore{Store: e.store, entered: make(chan struct{})}
	s := idempotency.StartSweeper(store, idempotency.SweeperConfig{Interval: time.Minute, Clock: e.clock})
	e.clock.Add(time.Minute)
	<-store.entered
	s.Stop() // returns only once the goroutine ended; goleak checks the rest
}

func TestSweep(t *testing.T) {
	t.Parallel()
	n, err := idempotency.SweeperConfig{Batch: 10}.Sweep(context.Background(), failingSweep{})
	assert.Equal(t, 3, n)
	assert.ErrorIs(t, err, errStoreDown)
}

type failingSweep struct{ idempotency.Store }

func (failingSweep) DeleteExpired(context.Context, int) (int, error) { return 3, errStoreDown }

func TestMemoryStoreReclaimsWithoutSweeper(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	claim := func(key string) {
		_, err := e.store.Claim(ctx, idempotency.ClaimRequest{Key: key, Lease: time.Second, TTL: time.Minute})
		require.NoError(t, err)
	}
	for i := range 100 {
		claim(fmt.Sprint("old", i))
	}
	e.clock.Add(time.Minute)
	for i := range 100 {
		claim(fmt.Sprint("new", i))
	}
	assert.Equal(t, 100, e.store.Len(), "each claim reclaimed expired records")
	assert.False(t, errors.Is(nil, errStoreDown))
}
