package retry

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Latency histogram layout: microseconds, four buckets per power of two
// (about 19% resolution), from 1 µs to about 19 hours. Fixed size: the
// estimate's memory never grows with the number of samples.
const (
	latencySubBits  = 2
	latencySub      = 1 << latencySubBits
	latencyMaxExp   = 36
	latencyBuckets  = (latencyMaxExp + 1) * latencySub
	latencyWindow   = 1024 // samples per window; two windows make the estimate
	latencyRecalc   = 32   // samples between refreshes of the cached quantiles
	latencyMaxHosts = 256  // hosts tracked at once; the least recently used makes way
)

// latencyIndex maps a latency to its bucket.
func latencyIndex(d time.Duration) int {
	us := uint64(0)
	if d > 0 {
		us = uint64(d / time.Microsecond)
	}
	if us < latencySub {
		return int(us)
	}
	exp := bits.Len64(us) - 1 // >= latencySubBits
	if exp > latencyMaxExp {
		return latencyBuckets - 1
	}
	sub := (us >> uint(exp-latencySubBits)) & (latencySub - 1)
	return (exp-latencySubBits+1)*latencySub + int(sub)
}

// latencyUpper is the upper bound of a bucket: every latency in it is below.
func latencyUpper(i int) time.Duration {
	if i < latencySub {
		return time.Duration(i+1) * time.Microsecond
	}
	exp := i/latencySub + latencySubBits - 1
	sub := uint64(i % latencySub)
	lo := (uint64(latencySub) + sub) << uint(exp-latencySubBits)
	width := uint64(1) << uint(exp-latencySubBits)
	return time.Duration(lo+width) * time.Microsecond
}

// latencyWindowCounts is one window of the histogram.
type latencyWindowCounts struct {
	counts [latencyBuckets]atomic.Uint32
	total  atomic.Uint32
}

// latencyEstimate keeps recent attempt latencies of one host and answers
// quantiles of them. Observe takes no lock and allocates nothing: three
// windows rotate, the estimate reads the current and the previous one, and
// the third is cleared before it is reused.
type latencyEstimate struct {
	windows [3]latencyWindowCounts
	gen     atomic.Uint64 // the current window is windows[gen%3]
	seen    atomic.Uint64 // samples ever observed
	// cached quantiles, refreshed every latencyRecalc samples
	cachedHigh, cachedHedge atomic.Int64
	qHigh, qHedge           float64
}

func newLatencyEstimate(qHigh, qHedge float64) *latencyEstimate {
	return &latencyEstimate{qHigh: qHigh, qHedge: qHedge}
}

// Observe records one attempt's latency.
func (e *latencyEstimate) Observe(d time.Duration) { e.observe(d, false) }

// ObserveCut records an attempt cut off by its timeout d, as a latency of
// at least d, and refreshes the quantiles at once: a host that got slower
// must not keep having its attempts cut at the old estimate until the next
// refresh.
func (e *latencyEstimate) ObserveCut(d time.Duration) { e.observe(d, true) }

func (e *latencyEstimate) observe(d time.Duration, refresh bool) {
	g := e.gen.Load()
	w := &e.windows[g%3]
	w.counts[latencyIndex(d)].Add(1)
	if w.total.Add(1) == latencyWindow {
		next := &e.windows[(g+1)%3]
		for i := range next.counts {
			next.counts[i].Store(0)
		}
		next.total.Store(0)
		e.gen.CompareAndSwap(g, g+1)
	}
	if n := e.seen.Add(1); refresh || n%latencyRecalc == 0 || n < latencyRecalc {
		e.cachedHigh.Store(int64(e.quantile(e.qHigh)))
		e.cachedHedge.Store(int64(e.quantile(e.qHedge)))
	}
}

// Samples is the number of latencies observed so far.
func (e *latencyEstimate) Samples() uint64 { return e.seen.Load() }

// quantile returns the upper bound of the bucket holding quantile q of the
// current and previous windows (0 with no samples).
func (e *latencyEstimate) quantile(q float64) time.Duration {
	g := e.gen.Load()
	cur, prev := &e.windows[g%3], &e.windows[(g+2)%3]
	var sums [latencyBuckets]uint32
	var total uint64
	for i := range sums {
		sums[i] = cur.counts[i].Load()
		if g > 0 {
			sums[i] += prev.counts[i].Load()
		}
		total += uint64(sums[i])
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	var acc uint64
	for i, c := range sums {
		acc += uint64(c)
		if acc >= rank {
			return latencyUpper(i)
		}
	}
	return latencyUpper(latencyBuckets - 1)
}

// High returns the cached high quantile (the attempt-timeout basis).
func (e *latencyEstimate) High() time.Duration { return time.Duration(e.cachedHigh.Load()) }

// HedgeDelay returns the cached hedging quantile.
func (e *latencyEstimate) HedgeDelay() time.Duration { return time.Duration(e.cachedHedge.Load()) }

// latencyByHost keeps one estimate per host, for at most latencyMaxHosts
// hosts: a new host beyond them takes the place of the least recently used
// one, so memory stays bounded and no host ever inherits another's latency.
type latencyByHost struct {
	hosts         sync.Map // host -> *hostLatency
	qHigh, qHedge float64

	// epoch counts the hosts added; a host's used is the epoch it was
	// last asked for in, which orders hosts by recent use without a
	// shared write on every request.
	epoch atomic.Int64

	mu    sync.Mutex // held to add and evict hosts
	count int
}

// hostLatency is one host's estimate and when it was last used.
type hostLatency struct {
	est  *latencyEstimate
	used atomic.Int64
}

func newLatencyByHost(qHigh, qHedge float64) *latencyByHost {
	return &latencyByHost{qHigh: qHigh, qHedge: qHedge}
}

// For returns the estimate of host.
func (l *latencyByHost) For(host string) *latencyEstimate {
	if v, ok := l.hosts.Load(host); ok {
		h := v.(*hostLatency)
		if e := l.epoch.Load(); h.used.Load() != e {
			h.used.Store(e)
		}
		return h.est
	}
	return l.add(host)
}

// add makes the estimate of a host not seen yet, evicting the least
// recently used host when there are latencyMaxHosts already.
func (l *latencyByHost) add(host string) *latencyEstimate {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.hosts.Load(host); ok { // added meanwhile
		return v.(*hostLatency).est
	}
	if l.count >= latencyMaxHosts {
		l.evictOldest()
	}
	h := &hostLatency{est: newLatencyEstimate(l.qHigh, l.qHedge)}
	h.used.Store(l.epoch.Add(1))
	l.hosts.Store(host, h)
	l.count++
	return h.est
}

// evictOldest removes the least recently used host; l.mu is held.
func (l *latencyByHost) evictOldest() {
	var (
		oldest any
		at     int64
	)
	l.hosts.Range(func(k, v any) bool {
		if u := v.(*hostLatency).used.Load(); oldest == nil || u < at {
			oldest, at = k, u
		}
		return true
	})
	if oldest != nil {
		l.hosts.Delete(oldest)
		l.count--
	}
}
