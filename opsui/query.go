package opsui

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/exactlyonce/retry/idempotency"
)

// DefaultPageSize is how many executions a list shows without a limit.
const DefaultPageSize = 50

// maxCaller is the longest caller a query takes, in bytes.
const maxCaller = 1024

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
		st, err := idempotency.ParseListState(s)
		if err != nil {
			return q, problem(400, CodeBadQuery, fmt.Sprintf("unknown state %q; want in_progress, stalled, parked or completed", s))
		}
		q.State = st
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > idempotency.MaxListPage {
			return q, problem(400, CodeBadQuery, fmt.Sprintf("limit %q; want 1 to %d", l, idempotency.MaxListPage))
		}
		q.Limit = n
	}
	var err error
	if q.Caller, err = checkCaller(v.Get("caller")); err != nil {
		return q, err
	}
	if q.KeyPrefix = v.Get("prefix"); q.KeyPrefix != "" {
		if err := checkKey("prefix", q.KeyPrefix); err != nil {
			return q, err
		}
	}
	if q.Cursor = v.Get("cursor"); len(q.Cursor) > maxCursor || !visible(q.Cursor) {
		return q, problem(400, CodeBadQuery, "malformed cursor")
	}
	return q, nil
}

// parseTarget reads the caller and key of one execution.
func parseTarget(v url.Values) (caller, key string, err error) {
	if caller, err = checkCaller(v.Get("caller")); err != nil {
		return "", "", err
	}
	key = v.Get("key")
	if err := checkKey("key", key); err != nil {
		return "", "", err
	}
	return caller, key, nil
}

// checkCaller accepts a caller of at most maxCaller bytes of valid text
// without control characters.
func checkCaller(c string) (string, error) {
	if len(c) > maxCaller || !printable(c) {
		return "", problem(400, CodeBadQuery, fmt.Sprintf("malformed caller: at most %d bytes, no control characters", maxCaller))
	}
	return c, nil
}

// checkKey accepts what idempotency.ParseKey does: 1 to MaxKeyLen visible
// ASCII characters.
func checkKey(what, k string) error {
	if k == "" || len(k) > idempotency.MaxKeyLen || !visible(k) {
		return problem(400, CodeBadQuery, fmt.Sprintf("malformed %s: 1 to %d visible ASCII characters", what, idempotency.MaxKeyLen))
	}
	return nil
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
