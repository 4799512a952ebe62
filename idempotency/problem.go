package idempotency

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Problem is an RFC 9457 problem detail, the body of every error response
// the Middleware makes itself (media type application/problem+json).
type Problem struct {
	// Type is "about:blank": Title is the status's reason phrase.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is a stable, machine-readable reason (an extension member), one of
	// the Code* constants.
	Code string `json:"code"`
}

// Problem codes.
const (
	// CodeKeyMissing (400): a required Idempotency-Key is missing.
	CodeKeyMissing = "idempotency_key_missing"
	// CodeKeyInvalid (400): the key is empty, too long, not visible ASCII,
	// malformed, or sent on several header lines.
	CodeKeyInvalid = "idempotency_key_invalid"
	// CodeKeyMismatch (422): the key was used with another request.
	CodeKeyMismatch = "idempotency_key_mismatch"
	// CodeInProgress (409): the key's first request is still executing.
	CodeInProgress = "idempotency_key_in_progress"
	// CodeLeaseLost (409): this attempt ran past its lease and another took
	// over; its outcome was discarded.
	CodeLeaseLost = "idempotency_lease_lost"
	// CodeBodyTooLarge (413): the body is over the fingerprinting limit.
	CodeBodyTooLarge = "request_body_too_large"
	// CodeBodyUnreadable (400): reading the body failed.
	CodeBodyUnreadable = "request_body_unreadable"
	// CodeCallerUnknown (401): the CallerFunc failed.
	CodeCallerUnknown = "caller_unknown"
	// CodeStoreFailed: the store failed; 503 with Retry-After when a retry
	// may succeed, 500 without it when a retry would fail the same way (a
	// permanent store error, an unreadable stored response).
	CodeStoreFailed = "idempotency_store_failed"
	// CodeTxFailed (503 with Retry-After, or 500 without it for a
	// permanent failure; never stored): a statement of the handler's
	// transaction failed, so it was rolled back and nothing was stored; a
	// retry with the same key runs afresh.
	CodeTxFailed = "transaction_rolled_back"
	// CodeResponseTooBig (500, stored): the outcome was over the response
	// limit.
	CodeResponseTooBig = "response_too_large"
	// CodeHandlerPanicked (500, stored): the handler panicked after execution
	// began.
	CodeHandlerPanicked = "handler_panicked"
)

// problemBody encodes a problem.
func problemBody(status int, code, detail string) []byte {
	b, err := json.Marshal(Problem{
		Type: "about:blank", Title: http.StatusText(status), Status: status,
		Detail: detail, Code: code,
	})
	if err != nil { // cannot happen: strings and an int
		panic(err)
	}
	return b
}

// writeProblem writes a problem response; retryAfter > 0 adds Retry-After in
// whole seconds, rounded up.
func writeProblem(w http.ResponseWriter, status int, code, detail string, retryAfter time.Duration) {
	b := problemBody(status, code, detail)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
