package idempotency

import (
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
)

// responseVersion is the first byte of an encoded response.
const responseVersion = 1

var errBadResponse = errors.New("idempotency: malformed stored response")

// encodeResponse appends an encoded response to dst: a version byte, the
// status as a uvarint, the number of header fields, each field's name and
// values, then the body; strings and the body are preceded by their length as
// a uvarint. Header names are sorted, so equal responses encode equally.
func encodeResponse(dst []byte, status int, header http.Header, body []byte) []byte {
	size := 16 + len(body)
	var small [16]string
	names := small[:0]
	for name, values := range header {
		names = append(names, name)
		size += len(name) + 4
		for _, v := range values {
			size += len(v) + 2
		}
	}
	slices.Sort(names)
	b := slices.Grow(dst, size)
	b = append(b, responseVersion)
	b = binary.AppendUvarint(b, uint64(status))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		values := header[name]
		b = binary.AppendUvarint(b, uint64(len(values)))
		for _, v := range values {
			b = appendString(b, v)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// encodedHeadSize is the size of what encodeResponse writes before the
// body's length: the version, the status and the header.
func encodedHeadSize(status int, header http.Header) int {
	n := 1 + uvarintLen(status) + uvarintLen(len(header))
	for name, values := range header {
		n += uvarintLen(len(name)) + len(name) + uvarintLen(len(values))
		for _, v := range values {
			n += uvarintLen(len(v)) + len(v)
		}
	}
	return n
}

// uvarintLen is the size of n encoded as a uvarint.
func uvarintLen(n int) int {
	size := 1
	for u := uint64(n); u >= 0x80; u >>= 7 {
		size++
	}
	return size
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func cutUvarint(b *[]byte) (uint64, bool) {
	v, k := binary.Uvarint(*b)
	if k <= 0 {
		return 0, false
	}
	*b = (*b)[k:]
	return v, true
}

func cutBytes(b *[]byte) ([]byte, bool) {
	field, rest, ok := cutField(*b)
	if ok {
		*b = rest
	}
	return field, ok
}
