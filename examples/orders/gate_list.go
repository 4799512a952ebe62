package main

import (
	"context"
	"fmt"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// lister returns the shared store as an idempotency.Lister, for the
// operator page.
func (g gatedStore) lister() (idempotency.Lister, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	l, ok := g.Store.(idempotency.Lister)
	if !ok {
		return nil, fmt.Errorf("the store %T cannot list executions", g.Store)
	}
	return l, nil
}

// List implements idempotency.Lister.
func (g gatedStore) List(ctx context.Context, q idempotency.ListQuery) (idempotency.ListPage, error) {
	l, err := g.lister()
	if err != nil {
		return idempotency.ListPage{}, err
	}
	return l.List(ctx, q)
}

// Now implements idempotency.Lister.
func (g gatedStore) Now(ctx context.Context) (time.Time, error) {
	l, err := g.lister()
	if err != nil {
		return time.Time{}, err
	}
	return l.Now(ctx)
}
