package main

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"sync"
	"time"
)

// errUnavailable is the warehouse's answer while it is down.
var errUnavailable = errors.New("warehouse: 503 service unavailable")

// warehouse is the downstream service the consumers ship orders through:
// a reservation of stock is the effect. A reservation with a key is
// performed once per key, as a service with idempotency keys does; one
// without a key, every time. Once outageAt reservations were performed it
// is down for outage.
type warehouse struct {
	outage   time.Duration
	outageAt int

	mu        sync.Mutex
	performed int
	perOrder  map[string]int
	keys      map[string]bool
	dedups    int
	downUntil time.Time
	wentDown  bool
}

func newWarehouse(outage time.Duration, outageAt int) *warehouse {
	return &warehouse{outage: outage, outageAt: outageAt, perOrder: make(map[string]int), keys: make(map[string]bool)}
}

// reserve reserves stock for order, with key unless "".
func (w *warehouse) reserve(order, key string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if !w.wentDown && w.outage > 0 && w.performed >= w.outageAt {
		w.wentDown, w.downUntil = true, now.Add(w.outage)
	}
	if now.Before(w.downUntil) {
		return errUnavailable
	}
	if key != "" {
		if w.keys[key] {
			w.dedups++
			return nil
		}
		w.keys[key] = true
	}
	w.performed++
	w.perOrder[order]++
	return nil
}

// totals returns the reservations performed, and the orders they were for.
func (w *warehouse) totals() (performed, distinct int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.performed, len(w.perOrder)
}

// shipped reports whether order was reserved at least once.
func (w *warehouse) shipped(order string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.perOrder[order] > 0
}

// faults decides, as a pure function of the seed, the order and the number
// of the handler call for it, which calls fail transiently: half of them
// before the warehouse call, half after it.
type faults struct {
	seed uint64
	rate float64

	mu    sync.Mutex
	calls map[string]int
}

func newFaults(seed uint64, rate float64) *faults {
	return &faults{seed: seed, rate: rate, calls: make(map[string]int)}
}

// next returns whether this call for order fails before or after its
// warehouse call.
func (f *faults) next(order string) (before, after bool) {
	f.mu.Lock()
	f.calls[order]++
	n := f.calls[order]
	f.mu.Unlock()
	u := uniform(f.seed, order, n)
	return u < f.rate/2, u >= f.rate/2 && u < f.rate
}

// uniform is a number in [0, 1) drawn from its arguments.
func uniform(seed uint64, s string, n int) float64 {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	h.Write(b[:])
	h.Write([]byte(s))
	// FNV mixes its last bytes into the low bits only: finish with
	// SplitMix64's mixer so that every bit depends on every input byte.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// errFlaky is a handler's transient failure.
var errFlaky = errors.New("transient failure (injected)")
