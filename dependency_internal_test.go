package retry

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
)

// BenchmarkWaitingRequestMemory reports the package's own memory per request
// waiting for a dependency that is down: 10,000 waiters, their deadlines
// 5 s after arrivals spread at the rate given (waiters whose waits end in the
// same 10 ms share a slot).
func BenchmarkWaitingRequestMemory(b *testing.B) {
	for _, rate := range []int{10000, 1000, 100} {
		b.Run(fmt.Sprintf("arriving %d per second", rate), func(b *testing.B) {
			var perWaiter float64
			for b.Loop() {
				perWaiter = waiterMemory(10_000, rate)
			}
			b.ReportMetric(perWaiter, "B/waiter")
		})
	}
}

// waiterMemory queues n waiters on a dependency that is down, arriving at
// rate per second, and returns the heap they take, per waiter.
func waiterMemory(n, rate int) float64 {
	clk := clock.NewMock()
	d := newDependency("h", clk)
	d.markDown()
	d.probing = true // no probe: only the queue is measured
	start := clk.Now()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	slots := make([]*waitSlot, 0, n)
	for i := range n {
		deadline := start.Add(time.Duration(i) * time.Second / time.Duration(rate)).Add(5 * time.Second)
		w := waiter{deadline: deadline, maxWait: time.Hour, maxWaiters: n}
		s, _, _ := d.enqueue(&w)
		slots = append(slots, s)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(slots)
	return float64(after.HeapAlloc-before.HeapAlloc-uint64(cap(slots))*8) / float64(n)
}

func TestWaitingRequestsCostLittleMemory(t *testing.T) {
	perWaiter := waiterMemory(10_000, 1000)
	t.Logf("%.0f B per waiter at 1,000 arrivals/s", perWaiter)
	assert.Less(t, perWaiter, 100.0)
}
