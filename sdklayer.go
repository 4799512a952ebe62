package retry

import (
	"hash/maphash"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// An SDK that retries on its own (AWS, Stripe, OpenAI, Anthropic, ...) put
// over a Transport is a retry layer above ours: its attempts times ours
// (stripe-go over a Transport: 3 x 4 = 12 attempts for a call that always
// fails). SDKs say when they retry, and the Transport yields to them:
//
//   - Amz-Sdk-Request: attempt=N; max=M (the AWS SDKs): an attempt before the
//     SDK's last (N < M) gets one attempt of ours, and its last (N >= M) gets
//     what is left of ours, max(ours-(M-1), 1). Without max (a limit the SDK
//     did not tell), one attempt each. So an SDK with its retries off (max=1)
//     gets all of ours, and in all a call never costs more than max(M, ours)
//     attempts, or more time than the SDK's own waits and one backoff of ours.
//   - X-Stainless-Retry-Count (the OpenAI and Anthropic SDKs, 2 retries by
//     default; the header says which retry, not how many are left): one
//     attempt each.
//   - X-Stripe-Client-User-Agent (every Stripe SDK sends it on every request;
//     stripe-go v82 retries 2 times by default: network errors, bodies that
//     are not Stripe errors, and 429 lock_timeout): one attempt each.
//   - A key of the caller's (the key header set on the request) that this
//     Transport sent recently: the request is an outer layer's retry (an SDK
//     resends its own key, as stripe-go does; so does code that repeats a
//     call after the Transport gave up): one attempt.
//
// WithoutYielding ignores the SDKs' headers (for an SDK whose own retries
// are off but which still sends them); a repeated key still gets one
// attempt. A 409 that says an earlier copy is in progress is still waited
// out, and a host that is down is still waited for: neither is an attempt.

// sdkAttempts returns how many attempts of its policy's ours the Transport
// gives a request whose header h says an SDK above it retries it, or 0 when
// h says nothing of the kind. It looks up three headers and allocates
// nothing on a request that has none of them.
func sdkAttempts(h http.Header, ours int) int {
	if v := h["Amz-Sdk-Request"]; len(v) > 0 {
		if n, m, ok := parseAmzSDKRequest(v[0]); ok {
			if m == 0 || n < m {
				return 1
			}
			return max(ours-(m-1), 1)
		}
	}
	if len(h["X-Stainless-Retry-Count"]) > 0 || len(h["X-Stripe-Client-User-Agent"]) > 0 {
		return 1
	}
	return 0
}

// parseAmzSDKRequest reads "attempt=N; max=M" (in any order, other
// parameters such as ttl ignored); ok reports an attempt number of at least
// 1. max is 0 when absent.
func parseAmzSDKRequest(v string) (attempt, maxAttempts int, ok bool) {
	for v != "" {
		var part string
		part, v, _ = strings.Cut(v, ";")
		name, val, found := strings.Cut(part, "=")
		if !found {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 1 {
			continue
		}
		switch strings.TrimSpace(name) {
		case "attempt":
			attempt = n
		case "max":
			maxAttempts = n
		}
	}
	return attempt, maxAttempts, attempt > 0
}

// WithoutYielding makes the Transport retry by its own policy even when a
// request's headers say an SDK above it retries it too (Amz-Sdk-Request,
// X-Stainless-Retry-Count, X-Stripe-Client-User-Agent; see Transport). Give
// it when that SDK's own retries are off (stripe-go with MaxNetworkRetries
// 0, say): its headers then no longer tell of a layer that retries. A
// request that repeats a key of the caller's the Transport sent recently
// still gets one attempt: that repeat is an outer layer's retry.
func WithoutYielding() Option {
	return optionFunc(func(c *config) { c.http.noYield = true })
}

// maxRecentKeys bounds the keys of the caller's a Transport remembers; past
// it, the oldest is forgotten for each new one.
const maxRecentKeys = 4096

// recentKeys are the keys of the caller's (host and key) that a Transport
// sent recently, hashed, so that a request that carries one again is known
// for an outer layer's retry. Safe for concurrent use; the zero value
// remembers none and allocates on its first key. Requests without a key of
// the caller's never touch it.
type recentKeys struct {
	mu   sync.Mutex
	seed maphash.Seed
	set  map[uint64]struct{}
	ring []uint64 // the hashes in the order they came, a circle of maxRecentKeys
	next int      // where the next hash goes in ring
}

// seen reports whether key was sent to host recently, and remembers it.
func (r *recentKeys) seen(host, key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		r.seed = maphash.MakeSeed()
		r.set = make(map[uint64]struct{}, maxRecentKeys)
		r.ring = make([]uint64, 0, maxRecentKeys)
	}
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(host)
	h.WriteByte(0)
	h.WriteString(strings.TrimSpace(key))
	sum := h.Sum64()
	if _, ok := r.set[sum]; ok {
		return true
	}
	if len(r.ring) < maxRecentKeys {
		r.ring = append(r.ring, sum)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = sum
		r.next = (r.next + 1) % maxRecentKeys
	}
	r.set[sum] = struct{}{}
	return false
}
