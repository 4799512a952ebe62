package opsui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry/idempotency"
)

// readTimeout bounds the store reads of one page.
const readTimeout = 5 * time.Second

// maxForm is the largest action form read, in bytes: room for a caller
// and a key of the longest taken, each byte percent-encoded.
const maxForm = 32 << 10

// Handler is the operator's page. Create it with New; it is safe for
// concurrent use.
type Handler struct {
	opts    Config
	base    string
	sampler *sampler
	acts    http.Handler
}

// New returns the page's Handler. It refuses every request (403) while
// opts.Authorize is nil.
func New(opts Config) *Handler {
	if opts.Path == "" {
		opts.Path = DefaultPath
	}
	opts.Path = "/" + strings.Trim(opts.Path, "/")
	if opts.Path == "/" {
		opts.Path = ""
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	h := &Handler{opts: opts, base: opts.Path, sampler: newSampler(opts.Clock)}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, problem(http.StatusForbidden, CodeUnauthorized, "cross-origin request refused"))
	}))
	h.acts = cop.Handler(http.HandlerFunc(h.act))
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w.Header())
	rest, ok := strings.CutPrefix(r.URL.Path, h.base)
	if !ok || (rest != "" && rest[0] != '/') {
		h.fail(w, r, problem(http.StatusNotFound, CodeNotFound, "no such page"))
		return
	}
	if rest == "" {
		http.Redirect(w, r, h.base+"/", http.StatusMovedPermanently)
		return
	}
	if rest == "/style.css" && r.Method == http.MethodGet {
		// The style sheet reveals nothing: served to everyone.
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(styleCSS)
		return
	}
	action := ActionView
	switch rest {
	case "/execution/retry":
		action = ActionRetry
	case "/execution/discard":
		action = ActionDiscard
	case "/execution/resume":
		action = ActionResume
	}
	wantMethod := http.MethodGet
	if action != ActionView {
		wantMethod = http.MethodPost
	}
	if r.Method != wantMethod && !(wantMethod == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", wantMethod)
		h.fail(w, r, problem(http.StatusMethodNotAllowed, CodeMethod, rest+" answers "+wantMethod+" only"))
		return
	}
	if err := h.authorize(r, action); err != nil {
		h.fail(w, r, err)
		return
	}
	if action != ActionView {
		h.acts.ServeHTTP(w, r)
		return
	}
	if err := checkFormat(r); err != nil {
		h.fail(w, r, err)
		return
	}
	var err error
	switch rest {
	case "/":
		err = h.overview(w, r)
	case "/executions":
		err = h.list(w, r)
	case "/execution":
		err = h.detail(w, r)
	default:
		err = problem(http.StatusNotFound, CodeNotFound, "no such page")
	}
	if err != nil {
		h.fail(w, r, err)
	}
}

// authorize asks Config.Authorize whether r may do a.
func (h *Handler) authorize(r *http.Request, a Action) error {
	if h.opts.Authorize == nil {
		return problem(http.StatusForbidden, CodeUnauthorized, "the page has no Authorize function: it refuses every request")
	}
	if err := h.opts.Authorize(r, a); err != nil {
		return problem(http.StatusForbidden, CodeUnauthorized, fmt.Sprintf("%s refused: %v", a, err))
	}
	return nil
}

// secure sets the headers every answer carries: no caching, no framing,
// no script, nothing from elsewhere.
func secure(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

// lister returns the Runner's store as a Lister.
func (h *Handler) lister() (idempotency.Lister, error) {
	if h.opts.Runner == nil {
		return nil, problem(http.StatusNotImplemented, CodeNotListable, "the page was given no Runner")
	}
	l, ok := h.opts.Runner.Store().(idempotency.Lister)
	if !ok {
		return nil, problem(http.StatusNotImplemented, CodeNotListable, fmt.Sprintf("the store %T cannot list executions", h.opts.Runner.Store()))
	}
	return l, nil
}

// Overview is the front page: the clients' dependencies and budgets, and
// the consumers.
type Overview struct {
	Dependencies []Dependency    `json:"dependencies"`
	Budgets      []Budget        `json:"budgets"`
	Consumers    []ConsumerStats `json:"consumers"`
	// States links the list of each state.
	States []StateLink `json:"states"`
	// Attention are the first parked and stalled executions (at most
	// overviewRows of each), or why they could not be read.
	Attention      []Execution `json:"attention"`
	AttentionError string      `json:"attention_error,omitempty"`
}

// overviewRows is how many parked and how many stalled executions the
// overview shows.
const overviewRows = 5

// StateLink links the list of one state.
type StateLink struct {
	State string `json:"state"`
	Link  string `json:"link"`
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) error {
	o := Overview{
		Dependencies: h.sampler.dependencies(h.opts.Clients),
		Budgets:      budgets(h.opts.Clients),
		Consumers:    consumers(h.opts.Consumers),
	}
	for _, st := range listStates {
		o.States = append(o.States, StateLink{State: st.String(), Link: h.base + "/executions?state=" + st.String()})
	}
	o.Attention = []Execution{}
	if l, err := h.lister(); err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
		defer cancel()
		for _, st := range []idempotency.ListState{idempotency.ListParked, idempotency.ListStalled} {
			page, err := l.List(ctx, idempotency.ListQuery{State: st, Limit: overviewRows})
			if err != nil {
				o.AttentionError = redactText(err.Error())
				break
			}
			for _, rec := range page.Records {
				e := summarize(rec, page.Now)
				e.Link = h.base + "/" + e.Link
				o.Attention = append(o.Attention, e)
			}
		}
	}
	return h.render(w, r, http.StatusOK, "overview", "Overview", o)
}

// List is one page of executions.
type List struct {
	State      string      `json:"state"`
	Caller     string      `json:"caller"`
	Prefix     string      `json:"prefix"`
	Limit      int         `json:"limit"`
	Executions []Execution `json:"executions"`
	// Next is the link of the next page, or "".
	Next string `json:"next,omitempty"`
	// Now is the store's clock, by which the states were judged.
	Now    time.Time   `json:"now"`
	States []StateLink `json:"states"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	v, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	q, err := parseListQuery(v)
	if err != nil {
		return err
	}
	l, err := h.lister()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	page, err := l.List(ctx, q)
	if err != nil {
		return storeProblem(err)
	}
	out := List{State: q.State.String(), Caller: q.Caller, Prefix: q.KeyPrefix, Limit: q.Limit,
		Executions: []Execution{}, Now: page.Now.UTC()}
	for _, rec := range page.Records {
		e := summarize(rec, page.Now)
		e.Link = h.base + "/" + e.Link
		out.Executions = append(out.Executions, e)
	}
	filter := url.Values{"state": {out.State}}
	if q.Caller != "" {
		filter.Set("caller", q.Caller)
	}
	if q.KeyPrefix != "" {
		filter.Set("prefix", q.KeyPrefix)
	}
	if q.Limit != DefaultPageSize {
		filter.Set("limit", fmt.Sprint(q.Limit))
	}
	if page.Next != "" {
		next := url.Values{}
		for k, v := range filter {
			next[k] = v
		}
		next.Set("cursor", page.Next)
		out.Next = h.base + "/executions?" + next.Encode()
	}
	for _, st := range listStates {
		filter.Set("state", st.String())
		out.States = append(out.States, StateLink{State: st.String(), Link: h.base + "/executions?" + filter.Encode()})
	}
	return h.render(w, r, http.StatusOK, "list", "Executions "+out.State, out)
}

func (h *Handler) detail(w http.ResponseWriter, r *http.Request) error {
	v, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	caller, key, err := parseTarget(v)
	if err != nil {
		return err
	}
	d, err := h.read(r.Context(), caller, key)
	if err != nil {
		return err
	}
	return h.render(w, r, http.StatusOK, "detail", "Execution "+key, d)
}

// read returns the detail of the live execution of (caller, key).
func (h *Handler) read(ctx context.Context, caller, key string) (Detail, error) {
	l, err := h.lister()
	if err != nil {
		return Detail{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	rec, err := l.Get(ctx, caller, key)
	if err != nil {
		return Detail{}, storeProblem(err)
	}
	// The store's clock judges the state.
	now, err := l.Now(ctx)
	if err != nil {
		return Detail{}, storeProblem(err)
	}
	d := detail(rec, now)
	d.Link = h.base + "/" + d.Link
	return d, nil
}

// storeProblem maps a store's error to a Problem.
func storeProblem(err error) error {
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		return problem(http.StatusNotFound, CodeNotFound, "no live execution of this caller and key")
	case errors.Is(err, idempotency.ErrInvalidList):
		return problem(http.StatusBadRequest, CodeBadQuery, redactText(err.Error()))
	default:
		return problem(http.StatusServiceUnavailable, CodeStoreFailed, redactText(err.Error()))
	}
}
