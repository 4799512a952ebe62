package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// errKilled is what a killed instance's store calls and handlers get.
var errKilled = errors.New("the instance was killed")

// gatedStore is an instance's view of the shared store: once the instance
// is killed, every call fails, as a dead process writes nothing.
type gatedStore struct {
	idempotency.Store
	dead *atomic.Bool
}

// gatedTxStore is a gatedStore over a TxStore.
type gatedTxStore struct {
	gatedStore
	tx idempotency.TxStore
}

// gate returns store gated by dead, a TxStore when store is one.
func gate(store idempotency.Store, dead *atomic.Bool) idempotency.Store {
	g := gatedStore{Store: store, dead: dead}
	if tx, ok := store.(idempotency.TxStore); ok {
		return gatedTxStore{gatedStore: g, tx: tx}
	}
	return g
}

func (g gatedStore) check() error {
	if g.dead.Load() {
		return errKilled
	}
	return nil
}

func (g gatedStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	if err := g.check(); err != nil {
		return idempotency.Claim{}, err
	}
	return g.Store.Claim(ctx, req)
}

func (g gatedStore) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Store.SaveRecoveryPoint(ctx, f, point, data, lease)
}

func (g gatedStore) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Store.Complete(ctx, f, response)
}

func (g gatedStore) ReleaseUnstarted(ctx context.Context, f idempotency.Fence) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Store.ReleaseUnstarted(ctx, f)
}

func (g gatedStore) Release(ctx context.Context, f idempotency.Fence) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Store.Release(ctx, f)
}

func (g gatedStore) Park(ctx context.Context, f idempotency.Fence, reason string) error {
	if err := g.check(); err != nil {
		return err
	}
	return g.Store.Park(ctx, f, reason)
}

func (g gatedTxStore) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	return g.tx.Begin(ctx, f)
}
