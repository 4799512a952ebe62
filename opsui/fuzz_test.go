package opsui_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/opsui"
)

// Any query string gets a page or a 4xx problem: never a panic, never a
// 5xx.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"state=parked", "state=zombie&limit=3", "limit=100000000000000000000", "cursor=%00", "caller=a&key=b",
		"prefix=%FF%FE", "state=completed&cursor=W1siYSJdXQ", "key=" + string(make([]byte, 300)), "format=json&state=stalled",
		"caller=shop&key=order-1&done=retry", ";;&&==", "state=parked&state=parked",
	} {
		f.Add(s)
	}
	w := newWorld(f)
	for _, k := range []string{"order-1", "order-2", "order-3"} {
		w.complete(f, "shop", k)
	}
	h := w.page(opsui.Config{Authorize: allowAll})
	f.Fuzz(func(t *testing.T, raw string) {
		for _, path := range []string{"/executions", "/execution", "/"} {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL.Path, r.URL.RawQuery = opsui.DefaultPath+path, raw
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code >= 500 || (rec.Code != 200 && rec.Code != 400 && rec.Code != 404) {
				t.Fatalf("GET %s?%q: %d %s", path, raw, rec.Code, rec.Body)
			}
		}
		// An action named in the query: the records are completed, so at
		// best a conflict.
		r := httptest.NewRequest(http.MethodPost, opsui.DefaultPath+"/execution/discard", nil)
		r.URL.RawQuery = raw
		r.Header.Set("Accept", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != 400 && rec.Code != 404 && rec.Code != 409 {
			t.Fatalf("POST discard?%q: %d %s", raw, rec.Code, rec.Body)
		}
	})
}

// Any key a store keeps goes through the page and back byte for byte: its
// link shows it, its page's discard form deletes it.
// CI fuzz runs: 20000x
func FuzzKeyRoundTrip(f *testing.F) {
	for _, k := range hostileKeys {
		f.Add(k)
	}
	w := newWorld(f)
	h := w.page(opsui.Config{Authorize: allowAll})
	f.Fuzz(func(t *testing.T, key string) {
		if key == "" || len(key) > 8<<10 {
			t.Skip("not a key the page takes")
		}
		w.park(t, key)
		link := opsui.DefaultPath + "/execution?" + url.Values{"caller": {"shop"}, "key": {key}}.Encode()
		rec := get(h, link+"&format=json", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %q: %d %s", link, rec.Code, rec.Body)
		}
		if d := decode[opsui.Detail](t, rec); d.Link != link {
			t.Fatalf("key %q links %q, want %q", key, d.Link, link)
		}
		page := get(h, link, "text/html")
		if page.Code != http.StatusOK {
			t.Fatalf("GET %q as HTML: %d", link, page.Code)
		}
		done := submit(h, formAction(t, page.Body.String(), "discard"), "text/html")
		if done.Code != http.StatusSeeOther {
			t.Fatalf("discard %q: %d %s", key, done.Code, done.Body)
		}
		if _, err := w.store.Get(t.Context(), "shop", key); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("after its discard %q is still there: %v", key, err)
		}
	})
}
