package opsui_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/opsui"
)

// An outcome stored by the Middleware shows its status and harmless header
// values; its body, its cookies and its other header values never show.
func TestStoredResponseRedacted(t *testing.T) {
	w := newWorld(t)
	api := idempotency.Middleware(w.runner, func(*http.Request) (string, error) { return "shop", nil })(
		http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			rw.Header().Set("Set-Cookie", "session=s3cr3t-cookie")
			rw.Header().Set("X-Api-Token", "tok-123456")
			rw.WriteHeader(http.StatusCreated)
			_, _ = rw.Write([]byte(`{"card":"4000056655665556","receipt":"r-99"}`))
		}))
	req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":7}`))
	req.Header.Set("Idempotency-Key", "charge-1")
	req.Header.Set("Authorization", "Bearer sk_live_zzz")
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	require.Equal(t, http.StatusCreated, rec.Code)

	h := w.page(opsui.Options{Authorize: allowAll})
	d := decode[opsui.Detail](t, get(h, base+"/execution?format=json&caller=shop&key=charge-1", ""))
	require.NotNil(t, d.Outcome)
	assert.Equal(t, http.StatusCreated, d.Outcome.Status)
	assert.Contains(t, d.Outcome.Header, opsui.Field{Name: "Content-Type", Value: "application/json"})
	assert.Contains(t, d.Outcome.Header, opsui.Field{Name: "Set-Cookie", Value: "[redacted]"})
	assert.Contains(t, d.Outcome.Header, opsui.Field{Name: "X-Api-Token", Value: "[redacted]"})
	assert.Equal(t, "[redacted] (44 bytes)", d.Outcome.Body)
	for _, page := range []string{
		get(h, base+"/execution?format=json&caller=shop&key=charge-1", "").Body.String(),
		get(h, base+"/execution?caller=shop&key=charge-1", "text/html").Body.String(),
	} {
		for _, secret := range []string{"s3cr3t", "tok-123456", "4000056655665556", "r-99", "sk_live_zzz", "amount"} {
			assert.NotContains(t, page, secret)
		}
	}
}

// Free text loses its credentials and card numbers; JSON its secret-named
// fields.
func TestRedactText(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	h := w.page(opsui.Options{Authorize: allowAll})
	d := decode[opsui.Detail](t, get(h, base+"/execution?format=json&caller=shop&key=order-1", ""))
	assert.NotContains(t, d.LastError, "sk_live_abc123")
	assert.Contains(t, d.LastError, "[redacted]")
	assert.Equal(t, `{"card_number":"[redacted]","charge":"ch_1"}`, d.Steps[0].Data)
}
