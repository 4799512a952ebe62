package idempotency

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// problemDetail is an RFC 9457 problem detail, the body of every error response
// the Middleware makes itself (media type application/problem+json).
type problemDetail struct {
	// Type is "about:blank": Title is the status's reason phrase.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is a stable, machine-readable reason (an extension member), one of
	// the code* constants.
	Code string `json:"code"`
}

// Problem codes: the "code" member of a problem (docs/protocol.md lists them).
const (
	// codeKeyMissing (400): a required Idempotency-Key is missing.
	codeKeyMissing = "idempotency_key_missing"
	// codeKeyInvalid (400): the key is empty, too long, not visible ASCII,
	// malformed, or sent on several header lines.
	codeKeyInvalid = "idempotency_key_invalid"
	// codeKeyMismatch (422): the key was used with another request.
	codeKeyMismatch = "idempotency_key_mismatch"
	// codeInProgress (409): the key's first request is still executing.
	codeInProgress = "idempotency_key_in_progress"
	// codeLeaseLost (409): this attempt ran past its lease and another took
	// over; its outcome was discarded.
	codeLeaseLost = "idempotency_lease_lost"
	// codeBodyTooLarge (413): the body is over the fingerprinting limit.
	codeBodyTooLarge = "request_body_too_large"
	// codeBodyUnreadable (400): reading the body failed.
	codeBodyUnreadable = "request_body_unreadable"
	// codeCallerUnknown (401): the caller function failed.
	codeCallerUnknown = "caller_unknown"
	// codeStoreFailed: the store failed; 503 with Retry-After when a retry
	// may succeed, 500 without it when a retry would fail the same way (a
	// permanent store error, an unreadable stored response).
	codeStoreFailed = "idempotency_store_failed"
	// codeTxFailed (503 with Retry-After, or 500 without it for a
	// permanent failure; never stored): a statement of the handler's
	// transaction failed, so it was rolled back and nothing was stored; a
	// retry with the same key runs afresh.
	codeTxFailed = "transaction_rolled_back"
	// codeResponseTooBig (500, stored): the outcome was over the response
	// limit.
	codeResponseTooBig = "response_too_large"
	// codeHandlerPanicked (500, stored): the handler panicked after execution
	// began.
	codeHandlerPanicked = "handler_panicked"
)

// problemBody encodes a problem.
func problemBody(status int, code, detail string) []byte {
	b, err := json.Marshal(problemDetail{
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
