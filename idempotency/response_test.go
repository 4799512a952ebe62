package idempotency

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEncodedResponseRoundTrip(t *testing.T) {
	t.Parallel()
	header := http.Header{
		"Content-Type": {"application/json"},
		"Set-Cookie":   {"a=1", "b=2"},
		"X-Empty":      {""},
	}
	enc := encodeResponse(nil, http.StatusAccepted, header, []byte(`{"ok":true}`))
	// Equal responses encode equally, whatever the map order.
	for range 10 {
		if again := encodeResponse(nil, http.StatusAccepted, header.Clone(), []byte(`{"ok":true}`)); !bytes.Equal(again, enc) {
			t.Fatal("encoding depends on map order")
		}
	}
	w := httptest.NewRecorder()
	if err := writeStored(w, enc, true); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusAccepted || w.Body.String() != `{"ok":true}` {
		t.Fatalf("replayed %d %q", w.Code, w.Body)
	}
	want := header.Clone()
	want.Set(replayedHeader, "true")
	if got := w.Header(); len(got) != len(want) || got.Get("Set-Cookie") != "a=1" || len(got["Set-Cookie"]) != 2 ||
		got.Get("Content-Type") != "application/json" || got.Get(replayedHeader) != "true" || len(got["X-Empty"]) != 1 {
		t.Fatalf("replayed header %v, want %v", got, want)
	}
}

// FuzzWriteStored feeds arbitrary stored bytes (a corrupt or foreign record)
// to the replay path: it must fail cleanly, leaving the header as it was, or
// write a valid status and a body taken from the end of the record.
func FuzzWriteStored(f *testing.F) {
	f.Add(encodeResponse(nil, 200, http.Header{"A": {"b"}}, []byte("body")))
	f.Add(encodeResponse(nil, 500, nil, nil))
	f.Add([]byte{responseVersion, 200, 1, 5, 'X'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		w := httptest.NewRecorder()
		w.Header().Set("Pre", "set")
		if err := writeStored(w, b, false); err != nil {
			if len(w.Header()) != 1 || w.Header().Get("Pre") != "set" {
				t.Fatalf("failed replay left header %v", w.Header())
			}
			return
		}
		if w.Code < 200 || w.Code > 999 {
			t.Fatalf("replayed status %d", w.Code)
		}
		if !bytes.HasSuffix(b, w.Body.Bytes()) {
			t.Fatalf("replayed body %q is not the end of the record %q", w.Body.Bytes(), b)
		}
	})
}

func TestEncodedSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		header http.Header
		body   int
	}{
		{200, nil, 0},
		{201, http.Header{"A": {"b"}}, 127},
		{500, http.Header{"Set-Cookie": {"a=1", strings.Repeat("v", 300)}, "X-Empty": {""}, strings.Repeat("N", 200): nil}, 128},
		{999, http.Header{"A": {strings.Repeat("x", 20000)}}, 70000},
	} {
		body := make([]byte, tc.body)
		enc := encodeResponse(nil, tc.status, tc.header, body)
		if got := encodedHeadSize(tc.status, tc.header) + uvarintLen(len(body)) + len(body); got != len(enc) {
			t.Errorf("status %d: computed size %d, encoded %d", tc.status, got, len(enc))
		}
	}
}
