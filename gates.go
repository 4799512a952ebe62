package retry

import (
	"sync"
	"sync/atomic"

	"github.com/benbjohnson/clock"
)

// maxDependencies is how many dependencies a gate set keeps before it
// evicts the idle ones (up, nobody waiting, not asked for since the last
// eviction); it then evicts again when it holds twice as many as it kept,
// so memory stays within twice the dependencies in use, and every one,
// however many came before, rides through outages.
const maxDependencies = 1024

// gateSet holds the gates of the dependencies one client sends to, by name
// (a Transport's hosts, a caller's targets): made on first use, forgotten
// once idle when there are many.
type gateSet struct {
	deps     sync.Map // name -> *dependency
	depCount atomic.Int32
	evictAt  atomic.Int32 // depCount at which idle gates are evicted next
	evicting sync.Mutex
}

// get returns the gate of name, made on first use with clk: a request's
// options never shape it.
func (g *gateSet) get(name string, clk clock.Clock) *dependency {
	if v, ok := g.deps.Load(name); ok {
		d := v.(*dependency)
		if !d.used.Load() {
			d.used.Store(true)
		}
		return d
	}
	v, loaded := g.deps.LoadOrStore(name, newDependency(name, clk))
	d := v.(*dependency)
	d.used.Store(true)
	if !loaded && g.depCount.Add(1) >= max(g.evictAt.Load(), maxDependencies) {
		g.evictIdle()
	}
	return d
}

// evictIdle forgets the gates that are up, that nobody waits for, and that
// no request asked for since the last eviction (the others are marked
// unasked, and go next time if they stay so).
func (g *gateSet) evictIdle() {
	if !g.evicting.TryLock() {
		return // another request is at it
	}
	defer g.evicting.Unlock()
	g.deps.Range(func(name, v any) bool {
		d := v.(*dependency)
		if !d.used.Swap(false) && d.idle() && g.deps.CompareAndDelete(name, d) {
			g.depCount.Add(-1)
		}
		return true
	})
	g.evictAt.Store(2 * g.depCount.Load())
}

// stats returns what each gate knows, for monitoring.
func (g *gateSet) stats() []DependencyStats {
	var out []DependencyStats
	g.deps.Range(func(_, d any) bool {
		out = append(out, d.(*dependency).Stats())
		return true
	})
	return out
}
