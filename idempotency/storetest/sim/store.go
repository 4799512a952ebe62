package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// gatedStore is an actor's view of the store under test: every call waits
// at a gate first, fails at once for a crashed actor, or for a context
// that ended (as a network store's call would), reaches the store with a
// context that no longer ends (so that nothing ends it while it runs), may
// lose its reply, and is observed by the world's checks.
type gatedStore struct {
	a     *actor
	inner idempotency.Store
}

// gatedTxStore is a gatedStore over a TxStore.
type gatedTxStore struct {
	*gatedStore
	tx idempotency.TxStore
}

// gate returns a's view of s: a TxStore when s is one.
func gate(a *actor, s idempotency.Store) idempotency.Store {
	g := &gatedStore{a: a, inner: s}
	if tx, ok := s.(idempotency.TxStore); ok {
		return &gatedTxStore{gatedStore: g, tx: tx}
	}
	return g
}

// call runs f, the store call named what, for the actor.
func (s *gatedStore) call(ctx context.Context, what string, f func(context.Context) error) error {
	if err := s.a.gate(what); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		s.a.w.logf("  %s: %s: %v", s.a.name, what, err)
		return err
	}
	lose := s.a.lose
	s.a.lose = false
	err := f(context.WithoutCancel(ctx))
	switch {
	case err != nil:
		s.a.w.logf("  %s: %s: %v", s.a.name, what, err)
	case lose:
		s.a.w.logf("  %s: %s: done, reply lost", s.a.name, what)
		return errLostReply
	}
	return err
}

func (s *gatedStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (c idempotency.Claim, err error) {
	err = s.call(ctx, "claim "+req.Key, func(ctx context.Context) error {
		c, err = s.inner.Claim(ctx, req)
		if err == nil {
			s.a.w.sawClaim(s.a, req, c)
		}
		return err
	})
	if err != nil {
		return idempotency.Claim{}, err
	}
	return c, nil
}

func (s *gatedStore) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	return s.call(ctx, fmt.Sprintf("save %s %q a%d", f.Key, point, f.Attempt), func(ctx context.Context) error {
		err := s.inner.SaveRecoveryPoint(ctx, f, point, data, lease)
		if err == nil {
			s.a.w.sawFencedWrite(s.a, f, "recovery point "+point)
		}
		return err
	})
}

func (s *gatedStore) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	return s.call(ctx, fmt.Sprintf("complete %s a%d", f.Key, f.Attempt), func(ctx context.Context) error {
		err := s.inner.Complete(ctx, f, response)
		if err == nil {
			s.a.w.sawComplete(s.a, f, response)
		}
		return err
	})
}

func (s *gatedStore) ReleaseUnstarted(ctx context.Context, f idempotency.Fence) error {
	return s.call(ctx, fmt.Sprintf("release-unstarted %s a%d", f.Key, f.Attempt), func(ctx context.Context) error {
		err := s.inner.ReleaseUnstarted(ctx, f)
		if err == nil {
			s.a.w.sawFencedWrite(s.a, f, "release-unstarted")
		}
		return err
	})
}

func (s *gatedStore) Release(ctx context.Context, f idempotency.Fence) error {
	return s.call(ctx, fmt.Sprintf("release %s a%d", f.Key, f.Attempt), func(ctx context.Context) error {
		err := s.inner.Release(ctx, f)
		if err == nil {
			s.a.w.sawFencedWrite(s.a, f, "release")
		}
		return err
	})
}

func (s *gatedStore) Get(ctx context.Context, caller, key string) (r idempotency.Record, err error) {
	err = s.call(ctx, "get "+key, func(ctx context.Context) error {
		r, err = s.inner.Get(ctx, caller, key)
		if err == nil {
			s.a.w.sawRecord(s.a, r, "get")
		}
		return err
	})
	return r, err
}

func (s *gatedStore) DeleteExpired(ctx context.Context, limit int) (n int, err error) {
	err = s.call(ctx, "delete expired", func(ctx context.Context) error {
		n, err = s.inner.DeleteExpired(ctx, limit)
		return err
	})
	return n, err
}

func (s *gatedStore) TakeOverStalled(ctx context.Context, caller string, limit int, lease time.Duration) (rs []idempotency.Record, err error) {
	err = s.call(ctx, "take over stalled", func(ctx context.Context) error {
		rs, err = s.inner.TakeOverStalled(ctx, caller, limit, lease)
		if err == nil {
			for _, r := range rs {
				s.a.w.sawTakeOver(s.a, r, "takes over stalled")
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

func (s *gatedStore) Park(ctx context.Context, f idempotency.Fence, reason string) error {
	return s.call(ctx, fmt.Sprintf("park %s a%d", f.Key, f.Attempt), func(ctx context.Context) error {
		err := s.inner.Park(ctx, f, reason)
		if err == nil {
			s.a.w.sawFencedWrite(s.a, f, "park")
		}
		return err
	})
}

func (s *gatedStore) ListParked(ctx context.Context, afterCaller, afterKey string, limit int) (rs []idempotency.Record, err error) {
	err = s.call(ctx, "list parked", func(ctx context.Context) error {
		rs, err = s.inner.ListParked(ctx, afterCaller, afterKey, limit)
		return err
	})
	return rs, err
}

// Begin opens the completion transaction.
func (s *gatedTxStore) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	var tx idempotency.Tx
	err := s.call(ctx, fmt.Sprintf("begin %s a%d", f.Key, f.Attempt), func(ctx context.Context) (err error) {
		tx, err = s.tx.Begin(ctx, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &gatedTx{s: s.gatedStore, f: f, inner: tx}, nil
}

// gatedTx is an actor's view of a completion transaction: its commit is
// gated and observed; its rollback always happens (a crashed process's
// connection ends, and the database rolls back).
type gatedTx struct {
	s     *gatedStore
	f     idempotency.Fence
	inner idempotency.Tx
}

func (t *gatedTx) Context(ctx context.Context) context.Context { return t.inner.Context(ctx) }

func (t *gatedTx) Err() error { return t.inner.Err() }

func (t *gatedTx) Complete(ctx context.Context, response []byte) error {
	err := t.s.call(ctx, fmt.Sprintf("commit %s a%d", t.f.Key, t.f.Attempt), func(ctx context.Context) error {
		err := t.inner.Complete(ctx, response)
		if err == nil {
			t.s.a.w.sawComplete(t.s.a, t.f, response)
		}
		return err
	})
	if err != nil {
		// The transaction must not stay open behind a crash or an error
		// the store never saw.
		_ = t.inner.Rollback(context.WithoutCancel(ctx))
	}
	return err
}

func (t *gatedTx) Rollback(ctx context.Context) error {
	return t.inner.Rollback(context.WithoutCancel(ctx))
}
