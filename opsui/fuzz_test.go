package opsui_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

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
	h := w.page(opsui.Options{Authorize: allowAll})
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
	})
}
