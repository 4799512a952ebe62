package retry

import (
	"context"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync"
)

// loopKey marks a context as belonging to a running retry loop.
type loopKey struct{}

// loopContext is a context marked as inside a retry loop. It is a smaller
// allocation than context.WithValue's, on the hot path of every Do, and it
// carries the loop's stable idempotency keys.
type loopContext struct {
	context.Context
	keys loopKeys
}

// Value answers the loop marker and defers every other key to the parent.
func (c *loopContext) Value(key any) any {
	if _, ok := key.(loopKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// loopOf returns the loop that ctx runs inside, or nil. Work detached from
// the loop with context.WithoutCancel is outside it: a context that can no
// longer end although the loop's can is not the loop's attempt.
func loopOf(ctx context.Context) *loopContext {
	lc, _ := ctx.Value(loopKey{}).(*loopContext)
	if lc != nil && ctx.Done() == nil && lc.Done() != nil {
		return nil
	}
	return lc
}

// inLoop reports whether ctx comes from inside a retry loop of this package.
// A loop found there makes a single attempt, so loops in one process never
// multiply their attempts.
func inLoop(ctx context.Context) bool {
	return loopOf(ctx) != nil
}

// markLoop returns ctx marked as inside a new retry loop.
func markLoop(ctx context.Context) *loopContext {
	return &loopContext{Context: ctx}
}

// fork returns ctx marked as inside the loop lc, with a ranking of its own
// over lc's keys: for a copy of an attempt sent beside another (a hedge),
// whose nested keyed calls must get the keys of the same calls of the
// other copy.
func (lc *loopContext) fork(ctx context.Context) *loopContext {
	return &loopContext{Context: ctx, keys: loopKeys{shared: &lc.keys}}
}

// loopKeys gives the keyed requests made inside one Do loop keys that stay
// the same on every attempt of the loop. A key belongs to a request's
// identity, its method and URL, and to its rank among the requests with that
// identity in the attempt: the first POST to /a gets the same key on every
// attempt whatever else the operation sends, and so does the second POST to
// /a. Requests with the same method and URL sent concurrently within one
// attempt are ranked in the order they reach the Transport, which may differ
// from attempt to attempt: give such requests keys of their own.
type loopKeys struct {
	mu     sync.Mutex
	base   string         // made on first use
	rank   map[uint64]int // requests seen per identity in this attempt
	shared *loopKeys      // when not nil, the ranking whose base this one uses
}

// keyFor returns the key of req in the current attempt, unquoted.
func (k *loopKeys) keyFor(req *http.Request) string {
	return k.keyForIdentity(requestIdentity(req))
}

// keyForIdentity returns the key of the request with identity id in the
// current attempt, unquoted.
func (k *loopKeys) keyForIdentity(id uint64) string {
	base := k.baseKey()
	k.mu.Lock()
	if k.rank == nil {
		k.rank = make(map[uint64]int)
	}
	k.rank[id]++
	n := k.rank[id]
	k.mu.Unlock()
	key := base + "." + strconv.FormatUint(id, 16)
	if n > 1 {
		key += "." + strconv.Itoa(n)
	}
	return key
}

// baseKey returns the loop's base key, made on first use.
func (k *loopKeys) baseKey() string {
	if k.shared != nil {
		return k.shared.baseKey()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.base == "" {
		k.base = newKey(true)
	}
	return k.base
}

// newAttempt starts ranking requests again for the next attempt.
func (k *loopKeys) newAttempt() {
	k.mu.Lock()
	clear(k.rank)
	k.mu.Unlock()
}

// requestIdentity hashes what makes a request the same request on every
// attempt of a loop: its method and URL (without fragment or user info).
func requestIdentity(req *http.Request) uint64 {
	u := req.URL
	return identity(req.Method, u.Scheme, u.Host, u.EscapedPath(), u.RawQuery)
}

// identity hashes the parts that name a request.
func identity(parts ...string) uint64 {
	h := fnv.New64a()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h.Sum64()
}
