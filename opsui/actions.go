package opsui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
)

// ActionResult is the answer to an action, as JSON (an HTML form gets a
// redirect to the execution's page instead).
type ActionResult struct {
	Action string `json:"action"`
	Caller string `json:"caller"`
	Key    string `json:"key"`
	// Execution is the execution after the action, or nil once discarded.
	Execution *Detail `json:"execution,omitempty"`
}

// act runs the action of a POST: retry or discard a parked execution,
// resume a stalled one. Authorization and the cross-origin check came
// first.
func (h *Handler) act(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, problem(http.StatusBadRequest, CodeBadQuery, "unreadable form"))
		return
	}
	// The page's own forms name the execution in their action's query;
	// other clients may send it as form fields instead, but not both.
	caller, key, err := parseTarget(r.Form)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.opts.Runner == nil {
		h.fail(w, r, problem(http.StatusNotImplemented, CodeNotListable, "the page was given no Runner"))
		return
	}
	name := strings.TrimPrefix(r.URL.Path, h.base+"/execution/")
	// The action runs to its end even if the operator's request goes away.
	ctx := context.WithoutCancel(r.Context())
	switch name {
	case "retry":
		_, err = h.opts.Runner.RetryParked(ctx, caller, key)
	case "discard":
		err = h.opts.Runner.DiscardParked(ctx, caller, key)
	case "resume":
		_, err = h.opts.Runner.ResumeStalled(ctx, caller, key)
	}
	if err != nil {
		h.fail(w, r, actionProblem(err))
		return
	}
	res := ActionResult{Action: name, Caller: caller, Key: key}
	if name != "discard" {
		d, err := h.read(ctx, caller, key)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		res.Execution = &d
	}
	if !wantJSON(r) {
		to := h.base + "/executions?state=parked"
		if res.Execution != nil {
			to = res.Execution.Link
		}
		http.Redirect(w, r, to+flash(name), http.StatusSeeOther)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// flash is the query parameter that tells the next page what was done.
func flash(action string) string {
	return "&" + url.Values{"done": {action}}.Encode()
}

// actionProblem maps the error of an action to a Problem.
func actionProblem(err error) error {
	var held *idempotency.InProgressError
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		return problem(http.StatusNotFound, CodeNotFound, "no live execution of this caller and key")
	case errors.Is(err, idempotency.ErrWrongState):
		return problem(http.StatusConflict, CodeConflict, strings.TrimPrefix(err.Error(), "idempotency: "))
	case errors.As(err, &held):
		return problem(http.StatusConflict, CodeConflict, "another execution holds the key")
	case errors.Is(err, idempotency.ErrLeaseLost):
		return problem(http.StatusConflict, CodeConflict, "another execution took the key over meanwhile")
	case errors.Is(err, idempotency.ErrNotResumable):
		return problem(http.StatusConflict, CodeConflict, redactText(err.Error()))
	default:
		return problem(http.StatusBadGateway, CodeActionFailed, redactText(err.Error()))
	}
}
