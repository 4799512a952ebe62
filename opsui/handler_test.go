package opsui_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/opsui"
)

const base = opsui.DefaultPath

// Without an Authorize function every page and every action is refused.
func TestRefusesEverythingWithoutAuthorize(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	h := w.page(opsui.Config{})
	for _, target := range []string{base + "/", base + "/executions?state=parked", base + "/execution?caller=shop&key=order-1", base + "/executions?format=json"} {
		p := requireProblem(t, get(h, target, "application/json"), http.StatusForbidden, opsui.CodeUnauthorized)
		assert.Contains(t, p.Detail, "no Authorize function")
		assert.NotContains(t, get(h, target, "text/html").Body.String(), "order-1")
	}
	requireProblem(t, post(h, "retry", "shop", "order-1", nil), http.StatusForbidden, opsui.CodeUnauthorized)
	requireProblem(t, post(h, "discard", "shop", "order-1", nil), http.StatusForbidden, opsui.CodeUnauthorized)
	// Still parked.
	rec, err := w.store.Get(t.Context(), "shop", "order-1")
	require.NoError(t, err)
	assert.NotEmpty(t, rec.Parked)
}

// Viewing and acting are two checks: a viewer sees but cannot act.
func TestViewerMayNotAct(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	var asked []opsui.Action
	h := w.page(opsui.Config{Authorize: func(r *http.Request, a opsui.Action) error {
		asked = append(asked, a)
		if a != opsui.ActionView {
			return errors.New("viewers only")
		}
		return nil
	}})
	require.Equal(t, http.StatusOK, get(h, base+"/executions?state=parked", "").Code)
	p := requireProblem(t, post(h, "retry", "shop", "order-1", nil), http.StatusForbidden, opsui.CodeUnauthorized)
	assert.Contains(t, p.Detail, "viewers only")
	requireProblem(t, post(h, "discard", "shop", "order-1", nil), http.StatusForbidden, opsui.CodeUnauthorized)
	assert.Equal(t, []opsui.Action{opsui.ActionView, opsui.ActionRetry, opsui.ActionDiscard}, asked)
	rec, err := w.store.Get(t.Context(), "shop", "order-1")
	require.NoError(t, err)
	assert.NotEmpty(t, rec.Parked, "still parked")
}

// Each state lists its executions, as HTML and as JSON.
func TestListsExecutionsByState(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	w.stall(t, "order-2")
	w.complete(t, "shop", "order-3")
	w.complete(t, "bank", "order-4")
	h := w.page(opsui.Config{Authorize: allowAll})
	for state, want := range map[string][]string{
		"parked": {"order-1"}, "stalled": {"order-2"}, "completed": {"order-3", "order-4"}, "in_progress": nil,
	} {
		l := decode[opsui.List](t, get(h, base+"/executions?format=json&state="+state, ""))
		var keys []string
		for _, e := range l.Executions {
			keys = append(keys, e.Key)
			assert.Equal(t, state, e.State)
			assert.True(t, strings.HasPrefix(e.Link, base+"/execution?"), e.Link)
		}
		assert.ElementsMatch(t, want, keys, state)
		// The same by Accept.
		assert.Equal(t, l.Executions, decode[opsui.List](t, get(h, base+"/executions?state="+state, "application/json")).Executions)
	}
	html := get(h, base+"/executions?state=parked", "text/html")
	require.Equal(t, http.StatusOK, html.Code)
	assert.Equal(t, "text/html; charset=utf-8", html.Header().Get("Content-Type"))
	assert.Contains(t, html.Body.String(), `data-key="order-1"`)
	assert.Contains(t, html.Header().Get("Content-Security-Policy"), "default-src 'none'")
	// Filters.
	l := decode[opsui.List](t, get(h, base+"/executions?format=json&state=completed&caller=bank", ""))
	require.Len(t, l.Executions, 1)
	assert.Equal(t, "order-4", l.Executions[0].Key)
	l = decode[opsui.List](t, get(h, base+"/executions?format=json&state=completed&prefix=order-3", ""))
	require.Len(t, l.Executions, 1)
	assert.Equal(t, "order-3", l.Executions[0].Key)
}

// Pages follow one another with their Next link until every record was
// shown once.
func TestPagesThroughExecutions(t *testing.T) {
	w := newWorld(t)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		w.complete(t, "shop", k)
	}
	h := w.page(opsui.Config{Authorize: allowAll})
	var keys []string
	next := base + "/executions?state=completed&limit=2"
	for next != "" {
		l := decode[opsui.List](t, get(h, next, "application/json"))
		require.LessOrEqual(t, len(l.Executions), 2)
		for _, e := range l.Executions {
			keys = append(keys, e.Key)
		}
		next = l.Next
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, keys)
}

// Bad input gets a 400 problem, never a panic or a store query.
func TestBadInputIsA400Problem(t *testing.T) {
	w := newWorld(t)
	h := w.page(opsui.Config{Authorize: allowAll})
	for _, target := range []string{
		"/executions?state=zombie",
		"/executions?limit=1000000",
		"/executions?limit=0",
		"/executions?limit=-3",
		"/executions?limit=ten",
		"/executions?state=parked&state=stalled",
		"/executions?cursor=%00%01",
		"/executions?cursor=notacursor",
		"/executions?cursor=" + strings.Repeat("a", 600),
		"/executions?prefix=%zz",
		"/executions?prefix=" + strings.Repeat("p", 9000),
		"/executions?caller=" + strings.Repeat("c", 1100),
		"/executions?state=parked;limit=3",
		"/executions?page=2",
		"/executions?format=xml",
		"/execution?caller=shop",
		"/execution?caller=shop&key=" + strings.Repeat("k", 9000),
		"/execution?caller=shop&key=",
		"/execution?caller=shop&key=bad%escape",
	} {
		p := requireProblem(t, get(h, base+target, ""), http.StatusBadRequest, opsui.CodeBadQuery)
		assert.NotEmpty(t, p.Detail, target)
	}
	requireProblem(t, get(h, base+"/execution?caller=shop&key=missing", ""), http.StatusNotFound, opsui.CodeNotFound)
	requireProblem(t, get(h, base+"/nothing", ""), http.StatusNotFound, opsui.CodeNotFound)
	requireProblem(t, get(h, base+"/execution/retry", ""), http.StatusMethodNotAllowed, opsui.CodeMethod)
	// A browser gets the problem as a page.
	html := get(h, base+"/executions?state=zombie", "text/html")
	assert.Equal(t, http.StatusBadRequest, html.Code)
	assert.Contains(t, html.Body.String(), "unknown state &#34;zombie&#34;")
}

// The detail shows steps, lease and reason with bodies and credentials
// redacted, and offers the actions the state allows.
func TestDetailRedacts(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	h := w.page(opsui.Config{Authorize: allowAll})
	d := decode[opsui.Detail](t, get(h, base+"/execution?format=json&caller=shop&key=order-1", ""))
	assert.Equal(t, "parked", d.State)
	assert.Equal(t, "ledger", d.Work)
	assert.Equal(t, []string{"retry", "discard"}, d.Actions)
	require.Len(t, d.Steps, 1)
	assert.Equal(t, "charge", d.Steps[0].Name)
	assert.Contains(t, d.Steps[0].Data, `"charge":"ch_1"`)
	assert.Contains(t, d.LastError, "ledger refused")
	assert.Contains(t, d.LeaseHolder, "attempt 1")
	html := get(h, base+"/execution?caller=shop&key=order-1", "text/html").Body.String()
	for _, page := range []string{html, get(h, base+"/execution?format=json&caller=shop&key=order-1", "").Body.String(),
		get(h, base+"/executions?format=json&state=parked", "").Body.String()} {
		assert.NotContains(t, page, "4242424242424242", "a card number")
		assert.NotContains(t, page, "sk_live_abc123", "a credential")
		assert.NotContains(t, page, "7 EUR", "the stored input")
	}
	assert.Contains(t, html, `id="retry"`)
}

// Retry runs a parked execution again; discard deletes one; resume runs a
// stalled one now. A browser is sent back to the execution's page.
func TestActions(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	w.park(t, "order-2")
	w.stall(t, "order-3")
	h := w.page(opsui.Config{Authorize: allowAll})

	res := decode[opsui.ActionResult](t, post(h, "retry", "shop", "order-1", map[string]string{"Accept": "application/json"}))
	require.NotNil(t, res.Execution)
	assert.Equal(t, "completed", res.Execution.State)
	// A browser's discard lands on the parked list, which says it was done.
	rec := post(h, "discard", "shop", "order-2", map[string]string{"Accept": "text/html"})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	landing := get(h, rec.Header().Get("Location"), "text/html")
	require.Equal(t, http.StatusOK, landing.Code, landing.Body.String())
	assert.Contains(t, landing.Body.String(), `id="flash"`)
	_, err := w.store.Get(t.Context(), "shop", "order-2")
	assert.Error(t, err, "discarded")

	rec = post(h, "resume", "shop", "order-3", map[string]string{"Accept": "text/html", "Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Header().Get("Location"), base+"/execution?caller=shop&key=order-3&done=resume")
	d := decode[opsui.Detail](t, get(h, base+"/execution?format=json&caller=shop&key=order-3", ""))
	assert.Equal(t, "completed", d.State)

	// Not in a state the action applies to.
	requireProblem(t, post(h, "retry", "shop", "order-1", nil), http.StatusConflict, opsui.CodeConflict)
	requireProblem(t, post(h, "resume", "shop", "order-1", nil), http.StatusConflict, opsui.CodeConflict)
	requireProblem(t, post(h, "discard", "shop", "nothing", nil), http.StatusNotFound, opsui.CodeNotFound)
	requireProblem(t, post(h, "retry", "shop", "", nil), http.StatusBadRequest, opsui.CodeBadQuery)
}

// A cross-origin POST is refused before it reaches the Runner.
func TestCrossOriginActionRefused(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	h := w.page(opsui.Config{Authorize: allowAll})
	for _, hdr := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": "https://evil.example", "Host": "example.com"},
	} {
		p := requireProblem(t, post(h, "retry", "shop", "order-1", hdr), http.StatusForbidden, opsui.CodeUnauthorized)
		assert.Contains(t, p.Detail, "cross-origin")
	}
	rec, err := w.store.Get(t.Context(), "shop", "order-1")
	require.NoError(t, err)
	assert.NotEmpty(t, rec.Parked, "still parked")
}

// The overview shows each dependency's state with a chart of its samples,
// the budgets and the consumers.
func TestOverviewShowsClients(t *testing.T) {
	w := newWorld(t)
	stats := retry.DependencyStats{Name: "ledger.internal", State: "up"}
	budget := retry.NewBudget(0.1, 1, 10)
	h := w.page(opsui.Config{
		Authorize: allowAll,
		Clock:     w.clock,
		Clients: []opsui.Client{{Name: "payments", Budget: budget,
			Dependencies: func() []retry.DependencyStats { return []retry.DependencyStats{stats} }}},
		Consumers: []opsui.Consumer{{Name: "orders", Stats: func() consumer.Stats { return consumer.Stats{Executed: 7, Parked: 1, Reconnects: 2} }}},
	})
	get(h, base+"/", "")
	stats.State, stats.Waiting, stats.Outages, stats.FailedFast = "down", 3, 1, 2
	w.clock.Add(2e9)
	o := decode[opsui.Overview](t, get(h, base+"/?format=json", ""))
	require.Len(t, o.Dependencies, 1)
	d := o.Dependencies[0]
	assert.Equal(t, "down", d.State)
	assert.Equal(t, 3, d.Waiting)
	require.Len(t, d.Recent, 2)
	assert.Equal(t, uint64(2), d.Recent[1].Failed)
	require.Len(t, o.Budgets, 1)
	assert.InDelta(t, 10, o.Budgets[0].Tokens, 0.01)
	require.Len(t, o.Consumers, 1)
	assert.Equal(t, uint64(7), o.Consumers[0].Executed)
	assert.Equal(t, uint64(2), o.Consumers[0].Reconnects, "a consumer's reconnects are shown")
	html := get(h, base+"/", "text/html").Body.String()
	assert.Contains(t, html, `data-dep="ledger.internal" data-state="down"`)
	assert.Contains(t, html, `<svg class="chart"`)
	assert.Contains(t, html, `class="down"`)
}
