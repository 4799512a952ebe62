package opsui_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/opsui"
)

// hostileKeys are keys a consumer stores as its broker gave them (a
// message id may be any string): each must be listed, shown and acted on.
var hostileKeys = []string{
	"order 42", "objednávka-7", "注文/8", "a/b/../c", "100%", "%zz", "%2F", `say "hi"`, "it's", "what?", "#frag",
	"a&key=b", "a+b", "a;b", "=", "<script>alert(1)</script>", "tab\there", "line\nbreak", "cr\rlf",
	"nul\x00byte", "\x7f", "bad\xffutf8", " lead and trail ", "\u2028", "🙂",
	strings.Repeat("long key ", 100),
}

// formAction finds the action of the form of the button id in an HTML page,
// as a browser reads it.
func formAction(t *testing.T, page, id string) string {
	t.Helper()
	re := regexp.MustCompile(`<form method="post" action="([^"]*)">\s*<button type="submit" id="` + id + `"`)
	m := re.FindStringSubmatch(page)
	require.NotNil(t, m, "no %s form in %s", id, page)
	return html.UnescapeString(m[1])
}

// submit posts the page's form to action with no field of its own, as a
// browser submits a form without inputs.
func submit(h http.Handler, action, accept string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, action, strings.NewReader(""))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Accept", accept)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// Issue 41: a parked message keyed "order 42" or "objednávka-7" was listed
// but its page, its JSON twin, Retry and Discard all answered 400
// "malformed key".
func TestAnyStoredKeyIsActionable(t *testing.T) {
	w := newWorld(t)
	for _, k := range hostileKeys {
		w.park(t, k)
	}
	h := w.page(opsui.Config{Authorize: allowAll})

	l := decode[opsui.List](t, get(h, base+"/executions?format=json&state=parked&limit=500", ""))
	require.Len(t, l.Executions, len(hostileKeys))
	links := map[string]string{}
	for _, e := range l.Executions {
		if utf8.ValidString(e.Key) {
			links[e.Key] = e.Link
		}
	}
	html := get(h, base+"/executions?state=parked&limit=500", "text/html")
	require.Equal(t, http.StatusOK, html.Code, html.Body.String())

	for i, k := range hostileKeys {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			link := base + "/execution?" + url.Values{"caller": {"shop"}, "key": {k}}.Encode()
			if utf8.ValidString(k) {
				assert.Equal(t, link, links[k], "the list links the page of %q", k)
			}
			rec := get(h, link+"&format=json", "")
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			d := decode[opsui.Detail](t, rec)
			assert.Equal(t, "parked", d.State)
			assert.Equal(t, link, d.Link)
			if utf8.ValidString(k) {
				assert.Equal(t, k, d.Key)
			}
			page := get(h, link, "text/html")
			require.Equal(t, http.StatusOK, page.Code, page.Body.String())
			assert.NotContains(t, page.Body.String(), "<script>alert")

			// Half are retried, half discarded, with the page's own forms.
			action := "retry"
			if i%2 == 1 {
				action = "discard"
			}
			done := submit(h, formAction(t, page.Body.String(), action), "text/html")
			require.Equal(t, http.StatusSeeOther, done.Code, done.Body.String())
			landing := get(h, done.Header().Get("Location"), "text/html")
			require.Equal(t, http.StatusOK, landing.Code, landing.Body.String())
			assert.Contains(t, landing.Body.String(), `id="flash"`)
			rec2, err := w.store.Get(t.Context(), "shop", k)
			if action == "discard" {
				assert.ErrorIs(t, err, idempotency.ErrNotFound)
			} else {
				require.NoError(t, err)
				assert.Equal(t, idempotency.StateCompleted, rec2.State)
			}
		})
	}
}

// The JSON API's form fields take any key too.
func TestActionFormTakesAnyKey(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order 42")
	w.park(t, "objednávka-7")
	h := w.page(opsui.Config{Authorize: allowAll})
	res := decode[opsui.ActionResult](t, post(h, "retry", "shop", "order 42", map[string]string{"Accept": "application/json"}))
	require.NotNil(t, res.Execution)
	assert.Equal(t, "completed", res.Execution.State)
	assert.Equal(t, "order 42", res.Key)
	rec := post(h, "discard", "shop", "objednávka-7", map[string]string{"Accept": "application/json"})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	_, err := w.store.Get(t.Context(), "shop", "objednávka-7")
	assert.ErrorIs(t, err, idempotency.ErrNotFound)
}

// What cannot be a key is still a 400: an invalid escape, no key, a key
// given twice, a key over the bound.
func TestMalformedKeyIsA400(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	h := w.page(opsui.Config{Authorize: allowAll})
	for _, q := range []string{
		"caller=shop", "caller=shop&key=", "caller=shop&key=%zz", "caller=%zz&key=order-1", "caller=shop&key=a%",
		"caller=shop&key=a&key=b", "caller=shop&caller=bank&key=order-1", "caller=shop;key=order-1",
		"caller=shop&key=" + strings.Repeat("k", 9000),
	} {
		requireProblem(t, get(h, base+"/execution?"+q, ""), http.StatusBadRequest, opsui.CodeBadQuery)
		requireProblem(t, submit(h, base+"/execution/retry?"+q, "application/json"), http.StatusBadRequest, opsui.CodeBadQuery)
	}
	// One target only: in the query or in the form, not in both.
	r := httptest.NewRequest(http.MethodPost, base+"/execution/retry?caller=shop&key=order-1",
		strings.NewReader(url.Values{"caller": {"shop"}, "key": {"order-2"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	requireProblem(t, rec, http.StatusBadRequest, opsui.CodeBadQuery)
	stored, err := w.store.Get(t.Context(), "shop", "order-1")
	require.NoError(t, err)
	assert.NotEmpty(t, stored.Parked, "still parked")
}
