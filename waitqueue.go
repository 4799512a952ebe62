package retry

import (
	"math"
	"time"
)

// waitSlot holds the requests waiting for a dependency whose waits end in
// the same slotWidth (their deadlines, or their MaxWait), and that all
// probed before or all did not. They share one channel: each release sends
// on it and wakes one of them, and closing it ends the waits of the rest.
// A channel of empty structs has no buffer, so a slot costs the same for
// one waiter or thousands: when many requests wait, they share slots and
// each costs a few bytes.
type waitSlot struct {
	key     slotKey
	ch      chan struct{}
	waiting int   // waiters not yet released
	probes  int   // releases that are probes, not yet taken by a waiter
	index   int32 // in the queue; -1 once out of it
	fresh   bool  // in its dependency's queue of requests that arrived after a recovery
}

// slotKey tells slots apart: the slotWidth their waits end in, their
// waiters' probe rank, and the failures their dependency had told of when
// they joined (see dependency.seen).
type slotKey struct {
	end  int64 // in slotWidths since the epoch
	rank uint8
	seen uint64
}

// Probe ranks: a probe goes from the waiters of the lowest rank there is.
const (
	rankFresh uint8 = iota // has not probed
	rankSpare              // probed, and has attempts to spare
	rankLast               // probed, and has only its last attempt left
	ranks
)

// slotWidth is the span of deadlines that share a slot: the precision of
// the earliest-deadline-first order and of MaxWait.
const slotWidth = 10 * time.Millisecond

// slotOf is the slot a wait ending at t ends in: t rounded up, so a wait
// never ends before its deadline.
func slotOf(t time.Time) int64 {
	n := t.UnixNano()
	end := n / int64(slotWidth)
	if n%int64(slotWidth) > 0 {
		end++
	}
	return end
}

// slotEnd is the time slot end stands for.
func slotEnd(end int64) time.Time { return time.Unix(0, end*int64(slotWidth)) }

// waitQueue is a min-heap of slots by the end of their waits: the earliest
// deadline goes first. It counts the waiters in all, and those of each
// probe rank.
type waitQueue struct {
	fresh   bool // the queue of requests that arrived after a recovery
	items   []*waitSlot
	byKey   map[slotKey]*waitSlot
	waiters int
	ranked  [ranks]int
}

// Len is the number of waiters.
func (q *waitQueue) Len() int { return q.waiters }

// join adds a waiter whose wait ends at end and returns its slot.
func (q *waitQueue) join(end int64, rank uint8, seen uint64) *waitSlot {
	k := slotKey{end, rank, seen}
	s := q.byKey[k]
	if s == nil {
		s = &waitSlot{key: k, ch: make(chan struct{}, math.MaxInt32)}
		q.insert(s)
	}
	s.waiting++
	q.count(s, 1)
	return s
}

// insert puts slot s, not in any queue, in q.
func (q *waitQueue) insert(s *waitSlot) {
	if q.byKey == nil {
		q.byKey = make(map[slotKey]*waitSlot)
	}
	s.index, s.fresh = int32(len(q.items)), q.fresh
	q.byKey[s.key] = s
	q.items = append(q.items, s)
	q.up(int(s.index))
}

// moveSeen moves the slots whose waiters joined when seen failures had
// been told of, and whose waits end in slot from or later, from q to the
// queue to, and returns how many waiters moved.
func (q *waitQueue) moveSeen(seen uint64, from int64, to *waitQueue) (moved int) {
	var moving []*waitSlot
	for _, s := range q.items {
		if s.key.seen == seen && s.key.end >= from {
			moving = append(moving, s)
		}
	}
	for _, s := range moving {
		n := s.waiting
		q.count(s, -n)
		q.drop(s)
		to.insert(s)
		to.count(s, n)
		moved += n
	}
	return moved
}

// release wakes one waiter of s, as the probe or not.
func (q *waitQueue) release(s *waitSlot, probe bool) {
	if probe {
		s.probes++
	}
	s.ch <- struct{}{}
	q.leave(s)
}

// leave takes one waiter out of s, which is dropped once empty.
func (q *waitQueue) leave(s *waitSlot) {
	s.waiting--
	q.count(s, -1)
	if s.waiting == 0 {
		q.drop(s)
	}
}

// expire ends the waits of every waiter of s, and returns how many.
func (q *waitQueue) expire(s *waitSlot) int {
	n := s.waiting
	q.count(s, -n)
	s.waiting = 0
	close(s.ch)
	q.drop(s)
	return n
}

// first returns the slot whose waits end first, or nil.
func (q *waitQueue) first() *waitSlot {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0]
}

// firstEndingFrom returns the earliest slot whose waits end in slot end or
// later, or nil.
func (q *waitQueue) firstEndingFrom(end int64) *waitSlot {
	if s := q.first(); s == nil || s.key.end >= end {
		return s
	}
	var best *waitSlot
	for _, s := range q.items {
		if s.key.end >= end && (best == nil || s.key.end < best.key.end) {
			best = s
		}
	}
	return best
}

// bestRank returns the lowest probe rank of the waiters, false if none
// waits.
func (q *waitQueue) bestRank() (uint8, bool) {
	for r := range ranks {
		if q.ranked[r] > 0 {
			return r, true
		}
	}
	return 0, false
}

// latest returns the latest slot of waiters of probe rank r, or nil.
func (q *waitQueue) latest(r uint8) *waitSlot {
	var best *waitSlot
	for _, s := range q.items {
		if s.key.rank == r && (best == nil || s.key.end > best.key.end) {
			best = s
		}
	}
	return best
}

func (q *waitQueue) count(s *waitSlot, n int) {
	q.waiters += n
	q.ranked[s.key.rank] += n
}

// drop takes an empty (or expired) slot out of the queue.
func (q *waitQueue) drop(s *waitSlot) {
	if s.index < 0 {
		return
	}
	delete(q.byKey, s.key)
	h := q.items
	i, last := int(s.index), len(h)-1
	if i != last {
		q.swap(i, last)
	}
	h[last] = nil
	q.items = h[:last]
	s.index = -1
	if i != last {
		q.down(i)
		q.up(i)
	}
}

func (q *waitQueue) swap(i, j int) {
	h := q.items
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j)
}

func (q *waitQueue) up(i int) {
	h := q.items
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key.end <= h[i].key.end {
			return
		}
		q.swap(p, i)
		i = p
	}
}

func (q *waitQueue) down(i int) {
	h := q.items
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].key.end < h[least].key.end {
			least = l
		}
		if r < len(h) && h[r].key.end < h[least].key.end {
			least = r
		}
		if least == i {
			return
		}
		q.swap(i, least)
		i = least
	}
}
