package idempotency

import (
	"errors"
	"strings"
)

// maxKeyLen is the longest idempotency key accepted, in bytes.
const maxKeyLen = 255

// errInvalidKey is returned by ParseKey for a malformed key.
var errInvalidKey = errors.New("idempotency: invalid idempotency key")

// ParseKey parses one Idempotency-Key field value. It accepts the IETF
// draft's form, a Structured Field string ("8e03978e-..."), and the plain form
// (8e03978e-...) that Stripe-style clients send. Leading and trailing spaces
// and tabs are ignored. The key itself must be 1 to 255 visible ASCII
// characters (0x21 to 0x7E); in the quoted form \" and \\ stand for " and \.
// The plain form may not contain '"', '\' or ',' (a comma means a list, such
// as two header lines joined). Structured Field parameters are not accepted.
func ParseKey(field string) (string, error) {
	s := strings.Trim(field, " \t")
	if s == "" {
		return "", errInvalidKey
	}
	if s[0] == '"' {
		return parseQuotedKey(s)
	}
	if len(s) > maxKeyLen {
		return "", errInvalidKey
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' || c == ',' {
			return "", errInvalidKey
		}
	}
	return s, nil
}

// parseQuotedKey parses an sf-string that is all of s.
func parseQuotedKey(s string) (string, error) {
	// Fast path: no escapes.
	if end := strings.IndexAny(s[1:], "\"\\"); end >= 0 && s[1+end] == '"' {
		if 1+end+1 != len(s) {
			return "", errInvalidKey
		}
		key := s[1 : 1+end]
		if !validKey(key) {
			return "", errInvalidKey
		}
		return key, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", errInvalidKey
			}
			b.WriteByte(s[i])
		case c == '"':
			if i+1 != len(s) {
				return "", errInvalidKey
			}
			key := b.String()
			if !validKey(key) {
				return "", errInvalidKey
			}
			return key, nil
		case c < 0x21 || c > 0x7e:
			return "", errInvalidKey
		default:
			b.WriteByte(c)
		}
		if b.Len() > maxKeyLen {
			return "", errInvalidKey
		}
	}
	return "", errInvalidKey // no closing quote
}

// validKey reports whether key is 1 to maxKeyLen visible ASCII characters.
func validKey(key string) bool {
	if key == "" || len(key) > maxKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// FormatKey returns key as a Structured Field string, the form ParseKey
// accepts and clients send by default.
func FormatKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}
