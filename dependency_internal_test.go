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

// Requests that arrived while the dependency recovered and found the
// window full wait for it as much as the backlog: when it goes down again
// before they were let go, one of them is its probe. They used to be left
// out of the probes, and with nobody else waiting (callers in a closed
// loop, all held) no probe went until their deadlines.
func TestWaitersFromARecoveryProbeWhenItIsDownAgain(t *testing.T) {
	clk := clock.NewMock()
	d := newDependency("h", clk)
	join := func(wait time.Duration) *waitSlot {
		w := waiter{deadline: clk.Now().Add(wait), maxWait: time.Hour, maxWaiters: 100}
		s, probe, err := d.enqueue(&w)
		assert.False(t, probe)
		assert.NoError(t, err)
		return s
	}
	d.markDown()
	backlog := join(50 * time.Millisecond) // it gives up before long
	d.probeFailed()
	for range initialWindow { // joined after the last failed probe: let go at the recovery
		join(5 * time.Second)
	}
	d.recovered()
	assert.Equal(t, depRecovering, d.state.Load())
	// The window is full: these wait.
	late := []*waitSlot{join(5 * time.Second), join(5 * time.Second), join(5 * time.Second)}
	// The backlog's wait ends, on the dependency's timer.
	clk.Add(60 * time.Millisecond)
	select {
	case _, released := <-backlog.ch:
		assert.False(t, released, "the backlog's wait ended")
	case <-time.After(10 * time.Second):
		t.Fatal("the backlog's wait never ended")
	}
	d.mu.Lock()
	assert.Equal(t, 3, d.waiting(), "those that came while it recovered")
	d.mu.Unlock()
	d.markDown()
	clk.Add(probeFirst)
	probed := 0
	select {
	case <-late[0].ch:
	case <-late[1].ch:
		probed = 1
	case <-late[2].ch:
		probed = 2
	case <-time.After(10 * time.Second):
		t.Fatal("none of those that came while it recovered is the probe")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.Equal(t, uint64(1), d.stats.Probes, "%+v", d.stats)
	assert.Equal(t, 1, late[probed].probes, "released as the probe")
}
