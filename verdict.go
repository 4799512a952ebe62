package retry

import (
	"errors"
	"net"
	"net/http"
)

// classifyError decides whether a transport error may be retried.
func (rt *roundTrip) classifyError(err error, o *outcome) {
	if !rt.c.classifier(err) {
		return
	}
	if rt.replayable() || neverSent(err) {
		o.retry = true
		return
	}
	o.stop = ErrNotIdempotent
}

// neverSent reports whether err proves the request never reached the
// server: the connection was never made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}

// classifyResponse decides whether a response may be retried.
func (rt *roundTrip) classifyResponse(resp *http.Response, o *outcome) {
	code := resp.StatusCode
	safe := rt.replayable()
	honourRetryAfter := false
	hint := 0
	if code >= 400 {
		hint = serverHint(resp.Header)
	}
	switch {
	case code == http.StatusConflict && rt.keyed && len(resp.Header["Retry-After"]) > 0 && hint >= 0:
		// A 409 with Retry-After to a keyed request: the server says the
		// first attempt with this key is still in progress (our
		// middleware's answer) and when to come back; its outcome is
		// coming. A 409 without it is a conflict (a merge conflict, a
		// resource that exists already): a final answer, handed back.
		o.retry, o.pending, honourRetryAfter = true, true, true
	case hint > 0:
		// The server says this one is worth repeating (a 500 or a 409
		// its SDK retries): retried when it is safe to.
		o.bad, o.retry, honourRetryAfter = true, safe, true
	case rt.c.http.statuses.has(code):
		o.bad, o.retry, honourRetryAfter = true, safe, true
	case code >= 500, code == http.StatusTooManyRequests:
		o.bad = true
	}
	switch {
	case hint < 0 && (o.bad || o.retry):
		// The server says not to repeat it.
		o.retry, o.pending, o.stop = false, false, ErrPushback
	case o.bad && !safe && (hint > 0 || rt.c.http.statuses.has(code)):
		o.stop = ErrNotIdempotent
	case o.bad && !o.retry:
		o.stop = ErrStatusNotRetried
	}
	if len(resp.Header[pushbackHeader]) > 0 {
		o.bad, o.retry, o.stop = true, false, ErrPushback
		return
	}
	if o.retry && honourRetryAfter {
		if v := resp.Header.Get("Retry-After"); v != "" {
			if d, ok := parseRetryAfter(v, rt.c.clock.Now()); ok {
				o.floor, o.hasFloor = d, true
			}
		}
	}
}
