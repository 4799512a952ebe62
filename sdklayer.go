package retry

import (
	"net/http"
	"strconv"
	"strings"
)

// An SDK that retries on its own (AWS, Stripe, OpenAI, Anthropic, ...) put
// over a Transport is a retry layer above ours: its attempts times ours
// (stripe-go over a Transport: 3 x 4 = 12 attempts for a call that always
// fails). SDKs say when they retry, and the Transport yields to them:
//
//   - Amz-Sdk-Request: attempt=N; max=M (the AWS SDKs): an attempt before the
//     SDK's last (N < M) gets one attempt of ours, and its last (N >= M) gets
//     what is left of ours, max(ours-(M-1), 1). Without max (a limit the SDK
//     did not tell), one attempt each. So an SDK with its retries off (max=1)
//     gets all of ours, and in all a call never costs more than max(M, ours)
//     attempts, or more time than the SDK's own waits and one backoff of ours.
//   - X-Stainless-Retry-Count (the OpenAI and Anthropic SDKs, 2 retries by
//     default; the header says which retry, not how many are left): one
//     attempt each.
//   - X-Stripe-Client-User-Agent (every Stripe SDK sends it on every request;
//     stripe-go v82 retries 2 times by default: network errors, bodies that
//     are not Stripe errors, and 429 lock_timeout): one attempt each.
//
// A key the caller repeats is not taken for an SDK's retry: code that
// sends one logical request again (after a crash, in the next round of a
// job) deserves the Transport's retries as much as the first time.
// WithoutYielding ignores the SDKs' headers (for an SDK whose own retries
// are off but which still sends them). A 409 that says an earlier copy is in progress is still waited
// out, and a host that is down is still waited for: neither is an attempt.

// sdkAttempts returns how many attempts of its policy's ours the Transport
// gives a request whose header h says an SDK above it retries it, or 0 when
// h says nothing of the kind. It looks up three headers and allocates
// nothing on a request that has none of them.
func sdkAttempts(h http.Header, ours int) int {
	if v := h["Amz-Sdk-Request"]; len(v) > 0 {
		if n, m, ok := parseAmzSDKRequest(v[0]); ok {
			if m == 0 || n < m {
				return 1
			}
			return max(ours-(m-1), 1)
		}
	}
	if len(h["X-Stainless-Retry-Count"]) > 0 || len(h["X-Stripe-Client-User-Agent"]) > 0 {
		return 1
	}
	return 0
}

// parseAmzSDKRequest reads "attempt=N; max=M" (in any order, other
// parameters such as ttl ignored); ok reports an attempt number of at least
// 1. max is 0 when absent.
func parseAmzSDKRequest(v string) (attempt, maxAttempts int, ok bool) {
	for v != "" {
		var part string
		part, v, _ = strings.Cut(v, ";")
		name, val, found := strings.Cut(part, "=")
		if !found {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 1 {
			continue
		}
		switch strings.TrimSpace(name) {
		case "attempt":
			attempt = n
		case "max":
			maxAttempts = n
		}
	}
	return attempt, maxAttempts, attempt > 0
}

// WithoutYielding makes the Transport retry by its own policy even when a
// request's headers say an SDK above it retries it too (Amz-Sdk-Request,
// X-Stainless-Retry-Count, X-Stripe-Client-User-Agent; see Transport). Give
// it when that SDK's own retries are off (stripe-go with MaxNetworkRetries
// 0, say): its headers then no longer tell of a layer that retries.
func WithoutYielding() Option {
	return optionFunc(func(c *config) { c.http.noYield = true })
}
