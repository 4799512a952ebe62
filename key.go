package retry

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"unsafe"

	"github.com/google/uuid"
)

// DefaultIdempotencyKeyHeader is the header that carries the key.
const DefaultIdempotencyKeyHeader = "Idempotency-Key"

// newKey returns a fresh key: a version 4 UUID from crypto/rand.
func newKey() string {
	return uuid.NewString()
}

// keySources are ChaCha8 generators, each seeded from crypto/rand: a
// cryptographically strong source that costs no system call per key.
var keySources = sync.Pool{New: func() any {
	var seed [32]byte
	rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}}

const hexDigits = "0123456789abcdef"

// newKeyInto makes a fresh key (a version 4 UUID from a crypto-strong source)
// in buf, quoted as a Structured Field string unless token is set.
func newKeyInto(buf *[38]byte, token bool) string {
	var u [16]byte
	src := keySources.Get().(*mrand.ChaCha8)
	src.Read(u[:])
	keySources.Put(src)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	b := buf[:]
	if token {
		b = buf[:36]
	} else {
		b[0], b[37] = '"', '"'
		b = buf[1:37]
	}
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexDigits[c>>4], hexDigits[c&0x0f]
		j += 2
	}
	// The key lives in buf, which belongs to one request and is never
	// written again: the string can share its bytes instead of copying them.
	if token {
		return unsafe.String(&buf[0], 36)
	}
	return unsafe.String(&buf[0], 38)
}

// formatKey renders a key in the configured form: the IETF draft's
// Structured Field string ("...") by default, or a plain token.
func (c *config) formatKey(key string) string {
	if c.http.tokenKeys {
		return key
	}
	return `"` + key + `"`
}

// idempotentMethod reports whether a request with this method may be
// repeated as it is (RFC 9110's idempotent methods; "" means GET).
func idempotentMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// needsKey reports whether a request with this method and header gets a key
// of the Transport's: a POST or PATCH without one, while keys are on.
func (c *config) needsKey(method string, h http.Header) bool {
	return !c.http.noKeys && (method == http.MethodPost || method == http.MethodPatch) && !c.hasKey(h)
}

// hasKey reports whether the request already carries a key. The header name
// is kept in canonical form, so this is one map lookup.
func (c *config) hasKey(h http.Header) bool {
	return len(h[c.http.keyHeader]) > 0
}

// firstValue returns the first value of the header name (in canonical
// form) in h, or "".
func firstValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
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
