package retry_test

import (
	"testing"
	"time"

	"github.com/exactlyonce/retry"
)

// BenchmarkBudget measures one Budget call, from one goroutine (serial) and
// from GOMAXPROCS goroutines sharing the budget (parallel; ns/op is then wall
// time per call, all goroutines together).
func BenchmarkBudget(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		// newBudget returns the budget under test; op makes the i-th call of
		// one goroutine.
		newBudget func() *retry.Budget
		op        func(bu *retry.Budget, i int)
	}{
		{
			// Healthy traffic: the bucket is full, Succeeded only reads it.
			name:      "Succeeded",
			newBudget: retry.NewDefaultBudget,
			op:        func(bu *retry.Budget, _ int) { bu.Succeeded() },
		},
		{
			// Every call spends a token (a bucket too large to run dry).
			name: "AllowRetry",
			newBudget: func() *retry.Budget {
				return retry.NewBudget(0.1, 1, 1e9)
			},
			op: func(bu *retry.Budget, _ int) { bu.AllowRetry(now) },
		},
		{
			// One retry, then the ten successes that pay it back: every call
			// writes the token count.
			name:      "Mixed",
			newBudget: retry.NewDefaultBudget,
			op: func(bu *retry.Budget, i int) {
				if i%11 == 0 {
					bu.AllowRetry(now)
				} else {
					bu.Succeeded()
				}
			},
		},
		{
			// A total outage with no floor: every retry is denied, lock-free.
			name: "Denied",
			newBudget: func() *retry.Budget {
				bu := retry.NewBudget(0.1, 0, 1)
				bu.AllowRetry(now)
				return bu
			},
			op: func(bu *retry.Budget, _ int) { bu.AllowRetry(now) },
		},
	}
	for _, c := range cases {
		b.Run(c.name+"/serial", func(b *testing.B) {
			bu := c.newBudget()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.op(bu, i)
				i++
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			bu := c.newBudget()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					c.op(bu, i)
					i++
				}
			})
		})
	}
}
