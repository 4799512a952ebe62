//go:build !upgradeold

package main

// This file holds the calls whose names changed since the oldest tested
// version: the test builds this checkout's driver with it, and the old
// version's with compat_old.go (tag upgradeold) instead.

import (
	"context"

	"github.com/exactlyonce/retry/idempotency"
)

// reconcile makes one pass of a Reconciler.
func reconcile(ctx context.Context, r *idempotency.Runner, cfg idempotency.ReconcilerConfig) (int, error) {
	return r.Reconcile(ctx, cfg)
}
