package idempotency_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// webhook returns a receiver behind the Middleware with opts, and the
// number of events it handled.
func webhook(t *testing.T, opts ...idempotency.Option) (http.Handler, *atomic.Int32) {
	t.Helper()
	var handled atomic.Int32
	h := idempotency.Middleware(idempotency.NewRunner(nil), idempotency.SingleTenant, opts...)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			handled.Add(1)
			fmt.Fprintf(w, "handled %d bytes", len(body))
		}))
	return h, &handled
}

func post(h http.Handler, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// An event sent again with the same id in its body is handled once; the
// repeat gets the stored response.
func TestKeyFromJSONBody(t *testing.T) {
	h, handled := webhook(t, idempotency.WithKeyFromJSON("/id"))
	event := `{"id":"evt_1","type":"charge.succeeded"}`
	first := post(h, event)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	again := post(h, event, "Idempotency-Key", "ignored")
	assert.Equal(t, http.StatusOK, again.Code)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, first.Body.String(), again.Body.String())
	assert.Equal(t, int32(1), handled.Load())
	other := post(h, `{"id":"evt_2","type":"charge.succeeded"}`)
	assert.Equal(t, http.StatusOK, other.Code)
	assert.Equal(t, int32(2), handled.Load())
	// The same id with another body is a mismatch, not a replay.
	assert.Equal(t, http.StatusUnprocessableEntity, post(h, `{"id":"evt_1","type":"charge.failed"}`).Code)
}

// A nested pointer, escaped tokens and a number all make keys.
func TestKeyFromJSONNestedAndNumber(t *testing.T) {
	h, handled := webhook(t, idempotency.WithKeyFromJSON("/event/a~1b"))
	assert.Equal(t, http.StatusOK, post(h, `{"event":{"a/b":12345678901234567890}}`).Code)
	again := post(h, `{"event":{"a/b":12345678901234567890}}`)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"), "the number, as written, is the key")
	assert.Equal(t, int32(1), handled.Load())
}

// Array indices in the pointer pick elements, as RFC 6901 says: events
// posted as an array (SendGrid's style) are keyed by their first event.
// Regression: arrays were never entered, so every delivery got 400.
func TestKeyFromJSONArrayIndex(t *testing.T) {
	h, handled := webhook(t, idempotency.WithKeyFromJSON("/0/sg_event_id"))
	batch := `[{"sg_event_id":"ev-1","event":"delivered"},{"sg_event_id":"ev-2","event":"open"}]`
	first := post(h, batch)
	require.Equal(t, http.StatusOK, first.Code, first.Body.String())
	again := post(h, batch)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), handled.Load())

	second, _ := webhook(t, idempotency.WithKeyFromJSON("/events/1/id"))
	assert.Equal(t, http.StatusOK, post(second, `{"events":[{"id":"a"},{"id":"b"}]}`).Code)

	for _, body := range []string{
		`[]`,            // no element 0
		`[{"other":1}]`, // an element without the member
	} {
		assert.Equal(t, http.StatusBadRequest, post(h, body).Code, body)
	}
	for _, pointer := range []string{"/01/id", "/-/id", "/1e0/id", "/+1/id", "/x/id", "/99999999999/id"} {
		h, _ := webhook(t, idempotency.WithKeyFromJSON(pointer))
		assert.Equal(t, http.StatusBadRequest, post(h, `[{"id":"a"},{"id":"b"}]`).Code, pointer)
	}
	// An object's member named by digits is still a member.
	numbered, _ := webhook(t, idempotency.WithKeyFromJSON("/0/id"))
	assert.Equal(t, http.StatusOK, post(numbered, `{"0":{"id":"n"}}`).Code)
	assert.Equal(t, int32(1), handled.Load())
}

// Bodies without a usable event id get problems, and the handler never runs.
func TestKeyFromJSONProblems(t *testing.T) {
	h, handled := webhook(t, idempotency.WithKeyFromJSON("/id"), idempotency.WithMaxRequestBody(64))
	for _, tc := range []struct {
		body, code string
		status     int
	}{
		{`not json`, "idempotency_key_missing", http.StatusBadRequest},
		{`{"type":"x"}`, "idempotency_key_missing", http.StatusBadRequest},
		{`{"id":{"nested":true}}`, "idempotency_key_missing", http.StatusBadRequest},
		{`["id"]`, "idempotency_key_missing", http.StatusBadRequest},
		{`{"id":"has space"}`, "idempotency_key_invalid", http.StatusBadRequest},
		{`{"id":""}`, "idempotency_key_invalid", http.StatusBadRequest},
		{`{"id":"` + strings.Repeat("x", 100) + `"}`, "request_body_too_large", http.StatusRequestEntityTooLarge},
	} {
		w := post(h, tc.body)
		assert.Equal(t, tc.status, w.Code, tc.body)
		var p struct {
			Code string `json:"code"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), tc.body)
		assert.Equal(t, tc.code, p.Code, tc.body)
	}
	assert.Zero(t, handled.Load())
	// Safe methods pass through untouched.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/webhook", nil))
	assert.Equal(t, http.StatusOK, w.Code)
}

func TestKeyFromJSONBadPointerPanics(t *testing.T) {
	for _, p := range []string{"", "id", "/"} {
		if p == "/" { // "" as the only token: the member named "" is a valid pointer
			assert.NotPanics(t, func() { idempotency.WithKeyFromJSON(p) })
			continue
		}
		assert.Panics(t, func() { idempotency.WithKeyFromJSON(p) }, p)
	}
}

// GitHub sends the event id in X-GitHub-Delivery: WithKeyHeader takes it.
func TestKeyFromWebhookHeader(t *testing.T) {
	h, handled := webhook(t, idempotency.WithKeyHeader("X-GitHub-Delivery"))
	id := "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	assert.Equal(t, http.StatusOK, post(h, `{"action":"opened"}`, "X-GitHub-Delivery", id).Code)
	assert.Equal(t, "true", post(h, `{"action":"opened"}`, "X-GitHub-Delivery", id).Header().Get("Idempotent-Replayed"))
	assert.Equal(t, http.StatusBadRequest, post(h, `{"action":"opened"}`).Code)
	assert.Equal(t, int32(1), handled.Load())
}

func FuzzKeyFromJSON(f *testing.F) {
	f.Add(`{"id":"evt_1"}`)
	f.Add(`{"id":12}`)
	f.Add(`{"id":["x"]}`)
	f.Add(`{`)
	h := idempotency.Middleware(idempotency.NewRunner(nil), idempotency.SingleTenant, idempotency.WithKeyFromJSON("/id"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) }))
	f.Fuzz(func(t *testing.T, body string) {
		w := post(h, body)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest && w.Code != http.StatusUnprocessableEntity &&
			w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%q: status %d", body, w.Code)
		}
	})
}
