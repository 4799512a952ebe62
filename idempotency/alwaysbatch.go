package idempotency

import "github.com/exactlyonce/retry/idempotency/internal/grouptest"

// The hook for the tests of stores: grouptest.AlwaysBatch.
func init() { grouptest.AlwaysBatch = alwaysBatch }

// alwaysBatch sends every claim and completion of runner (a *Runner on a
// BatchStore) through its group's batch operations, and reports whether it
// could.
func alwaysBatch(runner any) bool {
	r, ok := runner.(*Runner)
	if !ok || r.group == nil {
		return false
	}
	r.group.claims.batchAlone = true
	r.group.completions.batchAlone = true
	return true
}
