package retry

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
)

// keySources are ChaCha8 generators, each seeded from crypto/rand: a
// cryptographically strong source that costs no system call per key.
var keySources = sync.Pool{New: func() any {
	var seed [32]byte
	rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}}

const hexDigits = "0123456789abcdef"

// newKey returns a fresh key, a version 4 UUID from a crypto-strong source,
// quoted as a Structured Field string unless token is set. The string owns
// its bytes: keeping it keeps nothing else alive.
func newKey(token bool) string {
	var u [16]byte
	src := keySources.Get().(*mrand.ChaCha8)
	src.Read(u[:])
	keySources.Put(src)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var buf [38]byte
	b := buf[1:37]
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexDigits[c>>4], hexDigits[c&0x0f]
		j += 2
	}
	if token {
		return string(b)
	}
	buf[0], buf[37] = '"', '"'
	return string(buf[:])
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

// hasKey reports whether the request already carries a usable key. The
// header name is kept in canonical form, so this is one map lookup. An
// empty value, blank or the empty quoted string "", is no key: the IETF
// draft's key is a non-empty string.
func (c *config) hasKey(h http.Header) bool {
	v := h[c.http.keyHeader]
	return len(v) > 0 && !blankKey(v[0])
}

// blankKey reports whether a key header value is empty: only spaces and
// tabs, with or without an empty pair of quotes.
func blankKey(v string) bool {
	v = strings.Trim(v, " \t")
	return v == "" || v == `""`
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
