package opsui_test

import (
	"context"
	"encoding/json"
	"errors"
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

	h := w.page(opsui.Config{Authorize: allowAll})
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
	h := w.page(opsui.Config{Authorize: allowAll})
	d := decode[opsui.Detail](t, get(h, base+"/execution?format=json&caller=shop&key=order-1", ""))
	assert.NotContains(t, d.LastError, "sk_live_abc123")
	assert.Contains(t, d.LastError, "[redacted]")
	assert.Equal(t, `{"card_number":"[redacted]","charge":"ch_1"}`, d.Steps[0].Data)
}

// parkWithStep parks an execution of key whose one step returned result.
func (w *world) parkWithStep(t *testing.T, key string, result []byte) {
	t.Helper()
	_, err := w.runner.Do(t.Context(), idempotency.Request{Caller: "shop", Key: key}, func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		if _, err := e.Step(ctx, "token", func(context.Context, string) ([]byte, error) { return result, nil }); err != nil {
			return nil, err
		}
		return nil, idempotency.Park(errors.New("stopped after the step"))
	})
	require.ErrorIs(t, err, idempotency.ErrParked)
}

// jsonString is v encoded as JSON, as a string.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// Issue 41: a step result that keeps a JSON answer as a string showed the
// secrets inside it, in the page and in its JSON twin.
func TestRedactsJSONInsideStrings(t *testing.T) {
	tokens := jsonString(t, map[string]any{"access_token": "AT-s3cr3t", "refresh_token": "RT-s3cr3t", "scope": "read"})
	depth2 := jsonString(t, map[string]any{"status": 200, "body": tokens})
	inner := jsonString(t, []any{map[string]any{"client_secret": "CS-s3cr3t", "password": "PW-s3cr3t", "user": "ana"}})
	depth3 := jsonString(t, map[string]any{"status": 200, "body": jsonString(t, map[string]any{"data": inner, "ok": true})})
	whole := jsonString(t, depth2) // the result is itself a JSON string

	w := newWorld(t)
	w.parkWithStep(t, "depth-2", []byte(depth2))
	w.parkWithStep(t, "depth-3", []byte(depth3))
	w.parkWithStep(t, "string", []byte(whole))
	h := w.page(opsui.Config{Authorize: allowAll})
	for key, shown := range map[string][]string{
		"depth-2": {`"status":200`, `\"scope\":\"read\"`, `\"access_token\":\"[redacted]\"`},
		"depth-3": {`"status":200`, `\"ok\":true`, `\\\"user\\\":\\\"ana\\\"`, `\\\"password\\\":\\\"[redacted]\\\"`},
		"string":  {`\"status\":200`, `\\\"scope\\\":\\\"read\\\"`},
	} {
		d := decode[opsui.Detail](t, get(h, base+"/execution?format=json&caller=shop&key="+key, ""))
		require.Len(t, d.Steps, 1)
		for _, s := range shown {
			assert.Contains(t, d.Steps[0].Data, s, key)
		}
		for _, page := range []string{
			get(h, base+"/execution?format=json&caller=shop&key="+key, "").Body.String(),
			get(h, base+"/execution?caller=shop&key="+key, "text/html").Body.String(),
		} {
			for _, secret := range []string{"AT-s3cr3t", "RT-s3cr3t", "CS-s3cr3t", "PW-s3cr3t"} {
				assert.NotContains(t, page, secret, key)
			}
		}
	}
}
