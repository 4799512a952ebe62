package retry

import (
	"sync/atomic"
	"time"
)

// meterWidth is the span over which a dependency's answers are counted.
const meterWidth = 100 * time.Millisecond

// meterMinSpan is the shortest span a rate is taken over: a rate from the
// first few answers of a dependency just met would be noise.
const meterMinSpan = 10 * time.Millisecond

// answerMeter counts the answers a dependency gave, per meterWidth, so
// that the rate at which callers were served before an outage is known:
// callers in a closed loop ask only as fast as they are answered, and once
// they wait, they ask nothing at all. Counting takes no lock; a count that
// lands in a window just rotated out is lost, which an estimate can bear.
type answerMeter struct {
	_      [64]byte     // off the cache line of the dependency's read-mostly fields
	first  atomic.Int64 // the window of the first answer, plus one (zero: none yet)
	window atomic.Int64 // the current window, in meterWidths since the epoch
	count  atomic.Int64 // answers in it
	last   atomic.Int64 // answers in the window before it, if it came right before
	_      [64]byte
}

// mark counts an answer to an attempt sent at t.
func (m *answerMeter) mark(t time.Time) {
	w := t.UnixNano() / int64(meterWidth)
	if m.first.Load() == 0 {
		m.first.CompareAndSwap(0, w+1)
	}
	if cur := m.window.Load(); w > cur && m.window.CompareAndSwap(cur, w) {
		n := m.count.Swap(0)
		if w != cur+1 {
			n = 0
		}
		m.last.Store(n)
	}
	m.count.Add(1)
}

// rate is the answers per second over the last meterWidth or so before t:
// the current window and the one before it, or the current one alone if
// it is the first; zero when there were none.
func (m *answerMeter) rate(t time.Time) float64 {
	n := t.UnixNano()
	w := n / int64(meterWidth)
	cur := m.window.Load()
	into := time.Duration(n - cur*int64(meterWidth)) // since the current window began
	switch {
	case w == cur && m.first.Load() == cur+1:
		return float64(m.count.Load()) / max(into, meterMinSpan).Seconds()
	case w == cur:
		return float64(m.last.Load()+m.count.Load()) / (meterWidth + into).Seconds()
	case w == cur+1:
		return float64(m.count.Load()) / meterWidth.Seconds()
	}
	return 0
}
