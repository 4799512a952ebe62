package idempotency

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stored request comes back as it was: method, host, path and query as
// sent (escapes kept), the kept headers with all their values, the body.
func TestStoredRequestRoundTrips(t *testing.T) {
	r := httptest.NewRequest("PATCH", "http://shop.test/orders/a%2Fb?x=1&y=%20", strings.NewReader("body\x00bytes"))
	r.Header.Add("Content-Type", "application/json")
	r.Header.Add("X-Trace", "a")
	r.Header.Add("X-Trace", "b")
	r.Header.Add("X-Secret", "not kept")
	b := encodeRequest(r, []string{"Content-Type", "X-Trace", "X-Absent"}, []byte("body\x00bytes"))

	got, body, err := decodeRequest(context.Background(), b)
	require.NoError(t, err)
	assert.Equal(t, "PATCH", got.Method)
	assert.Equal(t, "shop.test", got.Host)
	assert.Equal(t, "/orders/a%2Fb?x=1&y=%20", got.URL.RequestURI())
	assert.Equal(t, "/orders/a%2Fb", got.URL.EscapedPath())
	assert.Equal(t, http.Header{"Content-Type": {"application/json"}, "X-Trace": {"a", "b"}}, got.Header)
	read, _ := io.ReadAll(got.Body)
	assert.Equal(t, "body\x00bytes", string(read))
	assert.Equal(t, "body\x00bytes", string(body))
	assert.EqualValues(t, len(body), got.ContentLength)

	empty := encodeRequest(httptest.NewRequest("POST", "/", nil), nil, nil)
	got, body, err = decodeRequest(context.Background(), empty)
	require.NoError(t, err)
	assert.Equal(t, http.NoBody, got.Body)
	assert.Empty(t, body)
}

// Whatever bytes a store hands back, decoding never panics, and what
// decodes encodes back to the same request.
func FuzzDecodeStoredRequest(f *testing.F) {
	r := httptest.NewRequest("POST", "http://h/p?q", strings.NewReader("b"))
	r.Header.Set("Content-Type", "text/plain")
	f.Add(encodeRequest(r, []string{"Content-Type"}, []byte("b")))
	f.Add([]byte{storedRequestVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Add(encodeResume("orders", []byte("input")))
	f.Fuzz(func(t *testing.T, b []byte) {
		if name, input, err := decodeResume(b); err == nil {
			again, _, err := decodeResume(encodeResume(name, input))
			if err != nil || again != name {
				t.Fatalf("resume %q does not round-trip: %v", name, err)
			}
		}
		got, body, err := decodeRequest(context.Background(), b)
		if err != nil {
			return
		}
		keep := make([]string, 0, len(got.Header))
		for k := range got.Header {
			keep = append(keep, k)
		}
		again, body2, err := decodeRequest(context.Background(), encodeRequest(got, keep, body))
		if err != nil {
			t.Fatalf("a decoded request does not decode again: %v", err)
		}
		if again.Method != got.Method || again.Host != got.Host || again.URL.RequestURI() != got.URL.RequestURI() ||
			string(body2) != string(body) || len(again.Header) != len(got.Header) {
			t.Fatalf("round trip changed the request: %+v vs %+v", again, got)
		}
	})
}
