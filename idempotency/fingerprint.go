package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/url"
	"strings"
)

// currentFingerprint prefixes every fingerprint Fingerprint makes, so that a
// future algorithm can be told apart from this one: the Middleware
// recomputes a request's fingerprint in the version a key was stored with
// (see Request.Refingerprint) instead of turning retries into false
// mismatches.
const currentFingerprint = "v1"

// Fingerprint returns the fingerprint of an HTTP request: its version ("v1"),
// a colon, and the hex SHA-256 of the method, the escaped path, the canonical
// query and the body, each preceded by its length as a big-endian uint64.
// The canonical query has its parameters sorted by name (values keep their
// order) and re-escaped, so "b=2&a=1" and "a=1&b=2" match; a query that does
// not parse is used as it is.
func Fingerprint(method, path, rawQuery string, body []byte) string {
	h := sha256.New()
	var n [8]byte
	field := func(s []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	field([]byte(method))
	field([]byte(path))
	field([]byte(canonicalQuery(rawQuery)))
	field(body)
	var sum [sha256.Size]byte
	var out [len(currentFingerprint) + 1 + 2*sha256.Size]byte
	copy(out[:], currentFingerprint+":")
	hex.Encode(out[len(currentFingerprint)+1:], h.Sum(sum[:0]))
	return string(out[:])
}

// fingerprintWith is Fingerprint in the given algorithm version; false for a
// version this package does not know.
func fingerprintWith(version, method, path, rawQuery string, body []byte) (string, bool) {
	if version != currentFingerprint {
		return "", false
	}
	return Fingerprint(method, path, rawQuery, body), true
}

// fingerprintVersion returns the version of a fingerprint: what precedes its
// first colon ("" for none).
func fingerprintVersion(fp string) string {
	v, _, ok := strings.Cut(fp, ":")
	if !ok {
		return ""
	}
	return v
}

func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return raw
	}
	return v.Encode()
}
