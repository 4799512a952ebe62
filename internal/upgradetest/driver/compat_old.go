//go:build upgradeold

package main

// This file holds the old version's names for the calls of compat_new.go:
// the test copies it into the old tree and builds with the tag upgradeold.

import (
	"context"

	"github.com/exactlyonce/retry/idempotency"
)

// reconcile makes one pass of a Reconciler.
func reconcile(ctx context.Context, r *idempotency.Runner, cfg idempotency.ReconcilerConfig) (int, error) {
	return idempotency.Reconcile(ctx, r, cfg)
}
