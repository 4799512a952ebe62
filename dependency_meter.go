package retry

import (
	"sync/atomic"
	"time"
)

// meterWidth is the span over which a dependency's answers are counted.
const meterWidth = 100 * time.Millisecond

// answerMeter counts the answers a dependency gave, per meterWidth, so
// that the rate at which callers were served before an outage is known:
// callers in a closed loop ask only as fast as they are answered, and once
// they wait, they ask nothing at all. Counting takes no lock; a count that
// lands in a window just rotated out is lost, which an estimate can bear.
type answerMeter struct {
	_      [64]byte     // off the cache line of the dependency's read-mostly fields
	window atomic.Int64 // the current window, in meterWidths since the epoch
	count  atomic.Int64 // answers in it
	last   atomic.Int64 // answers in the window before it, if it came right before
	_      [64]byte
}

// mark counts an answer to an attempt sent at t.
func (m *answerMeter) mark(t time.Time) {
	w := t.UnixNano() / int64(meterWidth)
	if cur := m.window.Load(); w > cur && m.window.CompareAndSwap(cur, w) {
		n := m.count.Swap(0)
		if w != cur+1 {
			n = 0
		}
		m.last.Store(n)
	}
	m.count.Add(1)
}

// rate is the answers per second in the last whole window before t; zero
// when there was none.
func (m *answerMeter) rate(t time.Time) float64 {
	w := t.UnixNano() / int64(meterWidth)
	n := int64(0)
	switch w - m.window.Load() {
	case 0:
		n = m.last.Load()
	case 1:
		n = m.count.Load()
	}
	return float64(n) / meterWidth.Seconds()
}
