package idempotency

import (
	"net/http"
)

// replayedHeader is set to "true" on every response replayed from the store.
const replayedHeader = "Idempotent-Replayed"

// writeStored writes an encoded response (see encodeResponse) to w, adding
// replayedHeader when replayed. It decodes straight into w's header, with
// one string conversion for all the names and values.
func writeStored(w http.ResponseWriter, b []byte, replayed bool) error {
	if len(b) == 0 || b[0] != responseVersion {
		return errBadResponse
	}
	s := string(b) // names and values are substrings of s
	rest := b[1:]
	off := func() int { return len(b) - len(rest) }
	status, ok := cutUvarint(&rest)
	if !ok || status < 200 || status > 999 {
		return errBadResponse
	}
	n, ok := cutUvarint(&rest)
	if !ok || n > uint64(len(rest)) {
		return errBadResponse
	}
	h := w.Header()
	added := make([]string, 0, n)
	fail := func() error {
		for _, k := range added {
			delete(h, k)
		}
		return errBadResponse
	}
	for range n {
		nameLen, ok := cutUvarint(&rest)
		if !ok || nameLen > uint64(len(rest)) {
			return fail()
		}
		name := s[off() : off()+int(nameLen)]
		rest = rest[nameLen:]
		nv, ok := cutUvarint(&rest)
		if !ok || nv > uint64(len(rest)) {
			return fail()
		}
		values := make([]string, nv)
		for i := range values {
			vl, ok := cutUvarint(&rest)
			if !ok || vl > uint64(len(rest)) {
				return fail()
			}
			values[i] = s[off() : off()+int(vl)]
			rest = rest[vl:]
		}
		h[name] = values
		added = append(added, name)
	}
	body, ok := cutBytes(&rest)
	if !ok || len(rest) != 0 {
		return fail()
	}
	if replayed {
		h.Set(replayedHeader, "true")
	}
	w.WriteHeader(int(status))
	if len(body) > 0 {
		_, _ = w.Write(body)
	}
	return nil
}
