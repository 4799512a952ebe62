package bench

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Timing of the Retry-After scenarios.
const (
	// retryAfterHonoured: a second attempt this long after the first one
	// followed the server's one-second Retry-After.
	retryAfterHonoured = 900 * time.Millisecond
	// longRetryAfter is the wait asked for with little time left.
	longRetryAfter = "3600"
	// longDeadline is the time left when the server asks for longRetryAfter.
	longDeadline = 2 * time.Second
)

// failFirst answers the first attempt of each logical request with status
// (and, when set, a Retry-After value made by retryAfter and a body of
// errBody bytes), and every later attempt with 200.
func failFirst(srv **Server, n int, status int, retryAfter func() string, errBody int) http.HandlerFunc {
	filler := bytes.Repeat([]byte("x"), errBody)
	return func(w http.ResponseWriter, r *http.Request) {
		if (*srv).AttemptsOf(r.Header.Get(RequestIDHeader)) > n {
			w.WriteHeader(http.StatusOK)
			return
		}
		if retryAfter != nil {
			w.Header().Set("Retry-After", retryAfter())
		}
		w.WriteHeader(status)
		w.Write(filler)
	}
}

// RetryAfterResult tells how a library met one Retry-After.
type RetryAfterResult struct {
	Attempts int
	// Status is the final response's status, 0 when the client returned an
	// error.
	Status int
	// Gap is the time between the first and the second attempt.
	Gap time.Duration
	// Took is the time the whole request took.
	Took time.Duration
	// Err is the client's error, if any.
	Err error
}

// Honoured reports whether the second attempt waited for a one-second
// Retry-After.
func (r RetryAfterResult) Honoured() bool {
	return r.Attempts >= 2 && r.Gap >= retryAfterHonoured
}

// RetryAfter sends one GET that first gets 503 with Retry-After made by value,
// then 200, and reports when the second attempt came. The request's deadline
// is timeout.
func RetryAfter(ctx context.Context, lib Library, value func() string, timeout time.Duration) RetryAfterResult {
	var srv *Server
	srv = NewServer(failFirst(&srv, 1, http.StatusServiceUnavailable, value, 0), true)
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()
	client := lib.New(Comparable, tr)
	status, took, err := send(ctx, client, http.MethodGet, srv.URL, "ra", nil, timeout)
	hits := srv.Hits("ra")
	res := RetryAfterResult{Attempts: len(hits), Status: status, Took: took, Err: err}
	if len(hits) >= 2 {
		res.Gap = hits[1].At.Sub(hits[0].At)
	}
	return res
}

// RetryAfterSeconds is a Retry-After of one second.
func RetryAfterSeconds() string { return "1" }

// RetryAfterDate is a Retry-After as an HTTP-date two seconds ahead, which
// (truncated to the second) is between one and two seconds away.
func RetryAfterDate() string {
	return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)
}

// LongRetryAfter sends one GET that gets 503 with Retry-After: 3600 when
// only 2 s are left before its deadline.
func LongRetryAfter(ctx context.Context, lib Library) RetryAfterResult {
	return RetryAfter(ctx, lib, func() string { return longRetryAfter }, longDeadline)
}

// LongVerdict says what a library did with Retry-After: 3600 and 2 s left.
func (r RetryAfterResult) LongVerdict() string {
	switch {
	case r.Attempts > 1:
		return "ignores it (retries at once)"
	case r.Took >= longDeadline*3/4:
		return "sleeps till the deadline"
	default:
		return "returns at once"
	}
}

// ReplayResult tells whether a POST body survived a retry and whether the
// library sent an Idempotency-Key.
type ReplayResult struct {
	Attempts int
	// Intact: the last attempt carried the whole body, byte for byte.
	Intact bool
	// KeySent: every attempt carried the same, non-empty Idempotency-Key.
	KeySent bool
	// AnyKey: at least one attempt carried an Idempotency-Key.
	AnyKey bool
}

// BodyReplay POSTs 1 KiB (seeded random bytes) that first gets 503, then 200.
func BodyReplay(ctx context.Context, lib Library, seed uint64) ReplayResult {
	body := make([]byte, 1024)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range body {
		body[i] = byte(r.UintN(256))
	}
	var srv *Server
	srv = NewServer(failFirst(&srv, 1, http.StatusServiceUnavailable, nil, 0), true)
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()
	client := lib.New(Comparable, tr)
	send(ctx, client, http.MethodPost, srv.URL, "post", body, 5*time.Second)
	hits := srv.Hits("post")
	res := ReplayResult{Attempts: len(hits)}
	if len(hits) == 0 {
		return res
	}
	res.Intact = bytes.Equal(hits[len(hits)-1].Body, body)
	res.KeySent = hits[0].Key != ""
	for _, h := range hits {
		if h.Key != "" {
			res.AnyKey = true
		}
		if h.Key != hits[0].Key {
			res.KeySent = false
		}
	}
	return res
}

// ReuseResult counts connections opened for requests whose failed attempts
// had large error bodies.
type ReuseResult struct {
	Requests, Attempts int
	// Conns is the number of TCP connections the server accepted.
	Conns int
}

// ConnReuse sends n GETs one after another; the first attempt of each gets
// 503 with a 16 KiB body, the second 200. Ideal: one connection.
func ConnReuse(ctx context.Context, lib Library, n int) ReuseResult {
	var srv *Server
	srv = NewServer(failFirst(&srv, 1, http.StatusServiceUnavailable, nil, 16<<10), false)
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()
	client := lib.New(Comparable, tr)
	for i := range n {
		send(ctx, client, http.MethodGet, srv.URL, "reuse-"+strconv.Itoa(i), nil, 5*time.Second)
	}
	return ReuseResult{Requests: n, Attempts: int(srv.Attempts()), Conns: int(srv.Conns())}
}
