package retry

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/google/uuid"
)

// DefaultIdempotencyKeyHeader is the header that carries the key.
const DefaultIdempotencyKeyHeader = "Idempotency-Key"

// newKey returns a fresh key: a version 4 UUID from crypto/rand.
func newKey() string {
	return uuid.NewString()
}

// formatKey renders a key in the configured form: the IETF draft's
// Structured Field string ("...") by default, or a plain token.
func (c *config) formatKey(key string) string {
	if c.http.tokenKeys {
		return key
	}
	return `"` + key + `"`
}

// hasKey reports whether the request already carries a key. The header name
// is kept in canonical form, so this is one map lookup.
func (c *config) hasKey(h http.Header) bool {
	return len(h[c.http.keyHeader]) > 0
}

// withKey returns a copy of h with the key header set to values. The value
// slices of the other headers are shared, never modified.
func withKey(h http.Header, name string, values []string) http.Header {
	out := make(http.Header, len(h)+1)
	for k, v := range h {
		out[k] = v
	}
	out[name] = values
	return out
}

// loopKeys gives the requests made inside one Do loop stable keys: the n-th
// keyed request of every attempt gets the same key, so a POST repeated by an
// outer loop reaches the server as the same logical request.
type loopKeys struct {
	mu   sync.Mutex
	base string
	seq  int
}

// next returns the key of the next keyed request in the current attempt.
func (k *loopKeys) next() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.base == "" {
		k.base = newKey()
	}
	k.seq++
	if k.seq == 1 {
		return k.base
	}
	return k.base + "." + strconv.Itoa(k.seq)
}

// newAttempt starts counting keyed requests again for the next attempt.
func (k *loopKeys) newAttempt() {
	k.mu.Lock()
	k.seq = 0
	k.mu.Unlock()
}
