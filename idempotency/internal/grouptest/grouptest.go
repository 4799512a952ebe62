// Package grouptest lets the tests of idempotency's stores send every
// claim and completion of a Runner through its group commit's batch
// operations, as those of concurrent executions go, even when one goes
// alone: so that a test running one request at a time (the fault matrix
// of storetest) covers the batched path. It adds nothing a user can
// reach.
package grouptest

// AlwaysBatch, set by package idempotency when it is initialized, makes
// runner (an *idempotency.Runner) send each of its claims through
// BatchStore.ClaimBatch and each of its completions through a batch
// (BeginBatch, Begin, Complete, Commit), alone or with others. It reports
// false, changing nothing, when runner is not a Runner or its store is
// not a BatchStore. Call it before the Runner's first use; it changes
// only that Runner.
var AlwaysBatch func(runner any) bool
