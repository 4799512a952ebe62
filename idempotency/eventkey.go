package idempotency

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// WithKeyFromJSON, for the Middleware, takes each request's key from its JSON body, at pointer
// (an RFC 6901 JSON Pointer such as "/id" or "/event/id"), instead of from
// a header: for webhook receivers whose sender puts the event id in the
// body, as Stripe does ("/id"). A token that is a decimal index ("0",
// "12") picks an array's element, so "/0/sg_event_id" keys a body that
// posts its events as an array by its first event's id. The value must be a string or a number
// that makes a valid key (see ParseKey; a string is taken as it is, never
// unquoted); a body that is not JSON, or lacks it, gets 400 (code
// idempotency_key_missing), a value that cannot be a key 400 (code
// idempotency_key_invalid), and a body over the request limit 413. The
// sender's retries of one event carry the same id, so the handler runs
// once per event. Every method but the safe ones needs the key.
//
// A sender that puts the event id in a header, as GitHub does
// (X-GitHub-Delivery), needs no more than WithKeyHeader with that name.
// Either way the fingerprint still covers the whole body: an event id
// sent again with another body gets 422.
func WithKeyFromJSON(pointer string) Option {
	tokens, ok := parsePointer(pointer)
	if !ok || len(tokens) == 0 {
		panic("idempotency: WithKeyFromJSON needs a JSON Pointer such as \"/id\", got " + pointer)
	}
	return middlewareOption(func(m *middleware) { m.jsonKey = tokens })
}

// parsePointer splits an RFC 6901 JSON Pointer into its reference tokens.
func parsePointer(p string) ([]string, bool) {
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return tokens, true
}

// jsonKeyHandler puts the key it finds in the JSON body in the key header
// of the request it hands to next (the Middleware's handler), so that the
// rest runs as for a key sent in a header.
type jsonKeyHandler struct {
	m    *middleware
	next http.Handler
}

// ServeHTTP implements http.Handler.
func (h *jsonKeyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		h.next.ServeHTTP(w, r)
		return
	}
	body, tooLarge, err := readBody(r, h.m.maxRequest, nil)
	switch {
	case tooLarge:
		writeProblem(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "The request body is too large.", 0)
		return
	case err != nil:
		writeProblem(w, http.StatusBadRequest, codeBodyUnreadable, "The request body could not be read.", 0)
		return
	}
	key, found := jsonKey(body, h.m.jsonKey)
	switch {
	case !found:
		writeProblem(w, http.StatusBadRequest, codeKeyMissing, "This request needs a JSON body with its event id at /"+
			strings.Join(h.m.jsonKey, "/")+".", 0)
		return
	case !validKey(key):
		writeProblem(w, http.StatusBadRequest, codeKeyInvalid,
			"The event id must be 1 to 255 visible ASCII characters.", 0)
		return
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set(h.m.header, FormatKey(key))
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r2.ContentLength = int64(len(body))
	h.next.ServeHTTP(w, r2)
}

// member returns what token refers to in v (RFC 6901, section 4): an
// object's member of that name, or an array's element at that index,
// written in decimal without leading zeros ("-", past the last element,
// refers to nothing there is).
func member(v any, token string) (any, bool) {
	switch c := v.(type) {
	case map[string]any:
		m, ok := c[token]
		return m, ok
	case []any:
		i, ok := arrayIndex(token)
		if !ok || i >= len(c) {
			return nil, false
		}
		return c[i], true
	}
	return nil, false
}

// arrayIndex parses an RFC 6901 array index: "0", or digits that do not
// start with 0.
func arrayIndex(token string) (int, bool) {
	if token == "" || len(token) > 9 || (len(token) > 1 && token[0] == '0') {
		return 0, false
	}
	i := 0
	for _, c := range []byte(token) {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, true
}

// jsonKey returns the string or number at the pointer's tokens in body.
func jsonKey(body []byte, tokens []string) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	for _, t := range tokens {
		var ok bool
		if v, ok = member(v, t); !ok {
			return "", false
		}
	}
	switch k := v.(type) {
	case string:
		return k, true
	case json.Number:
		return k.String(), true
	}
	return "", false
}
