package opsui

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/exactlyonce/retry/idempotency"
)

// DefaultPageSize is how many executions a list shows without a limit.
const DefaultPageSize = 50

// maxLimit is the largest page a Lister returns (idempotency.ListQuery's
// Limit: 1 to 500).
const maxLimit = 500

// listStates are the states a list shows, in order.
var listStates = []idempotency.ListState{idempotency.ListInProgress, idempotency.ListStalled, idempotency.ListParked, idempotency.ListCompleted}

// maxCaller is the longest caller a query takes, in bytes.
const maxCaller = 1024

// maxKey is the longest key or key prefix a query or form takes, in
// bytes: far more than any broker's message id or Idempotency-Key
// (255), yet a bounded URL once percent-encoded.
const maxKey = 8 << 10

// maxCursor is the longest cursor a query takes, in bytes.
const maxCursor = 512

// parseListQuery reads a list's parameters: state (default parked),
// caller, prefix, limit and cursor.
func parseListQuery(v url.Values) (idempotency.ListQuery, error) {
	q := idempotency.ListQuery{State: idempotency.ListParked, Limit: DefaultPageSize}
	for name, values := range v {
		switch name {
		case "state", "caller", "prefix", "limit", "cursor", "format", "done":
			if len(values) > 1 {
				return q, problem(400, CodeBadQuery, fmt.Sprintf("%s given %d times", name, len(values)))
			}
		default:
			return q, problem(400, CodeBadQuery, fmt.Sprintf("unknown parameter %q", name))
		}
	}
	if s := v.Get("state"); s != "" {
		var st idempotency.ListState
		if err := st.UnmarshalText([]byte(s)); err != nil {
			return q, problem(400, CodeBadQuery, fmt.Sprintf("unknown state %q; want in_progress, stalled, parked or completed", s))
		}
		q.State = st
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxLimit {
			return q, problem(400, CodeBadQuery, fmt.Sprintf("limit %q; want 1 to %d", l, maxLimit))
		}
		q.Limit = n
	}
	var err error
	if q.Caller, err = checkCaller(v.Get("caller")); err != nil {
		return q, err
	}
	q.KeyPrefix = v.Get("prefix")
	if err := checkKey("prefix", q.KeyPrefix); err != nil {
		return q, err
	}
	if q.Cursor = v.Get("cursor"); len(q.Cursor) > maxCursor || !visible(q.Cursor) {
		return q, problem(400, CodeBadQuery, "malformed cursor")
	}
	return q, nil
}

// parseTarget reads the caller and key of one execution: each at most
// once, and taken exactly as decoded, for a key is any string a consumer
// or the Middleware stored (a broker's message id may hold spaces,
// non-ASCII letters, slashes, control characters or invalid UTF-8), and
// url.Values.Encode writes each of its bytes back.
func parseTarget(v url.Values) (caller, key string, err error) {
	for _, name := range [2]string{"caller", "key"} {
		if n := len(v[name]); n > 1 {
			return "", "", problem(400, CodeBadQuery, fmt.Sprintf("%s given %d times", name, n))
		}
	}
	if caller, err = checkCaller(v.Get("caller")); err != nil {
		return "", "", err
	}
	key = v.Get("key")
	if key == "" {
		return "", "", problem(400, CodeBadQuery, "malformed key: empty")
	}
	if err := checkKey("key", key); err != nil {
		return "", "", err
	}
	return caller, key, nil
}

// checkCaller accepts a caller of at most maxCaller bytes.
func checkCaller(c string) (string, error) {
	if len(c) > maxCaller {
		return "", problem(400, CodeBadQuery, fmt.Sprintf("malformed caller: at most %d bytes", maxCaller))
	}
	return c, nil
}

// checkKey accepts a key (or key prefix) of at most maxKey bytes, of any
// bytes: the stores keep any string the Runner is given.
func checkKey(what, k string) error {
	if len(k) > maxKey {
		return problem(400, CodeBadQuery, fmt.Sprintf("malformed %s: at most %d bytes", what, maxKey))
	}
	return nil
}

// parseQuery parses a raw query string, refusing what url.Values would
// silently drop (an invalid escape, a semicolon).
func parseQuery(raw string) (url.Values, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, problem(400, CodeBadQuery, "malformed query: "+cut(err.Error()))
	}
	return v, nil
}

// visible reports whether s is visible ASCII (0x21 to 0x7E) only.
func visible(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return false
		}
	}
	return true
}
