package opsui

import (
	"fmt"
	"net/url"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// Execution is one execution as a list shows it (and its JSON twin).
type Execution struct {
	Caller  string `json:"caller"`
	Key     string `json:"key"`
	State   string `json:"state"`
	Attempt int64  `json:"attempt"`
	// LeaseUntil is the end of the lease of the execution's latest attempt.
	LeaseUntil time.Time `json:"lease_until"`
	// Lease says it in words: "ends in 20s", "ran out 3m ago".
	Lease     string    `json:"lease"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Point is the last recovery point saved ("" before the first).
	Point string `json:"recovery_point"`
	// Parked is why a Reconciler gave up on it (redacted), or "".
	Parked string `json:"parked,omitempty"`
	// Link is the page of its detail, relative to the handler's path.
	Link string `json:"link"`
}

// Detail is one execution's detail: everything the store keeps of it,
// bodies and credentials redacted.
type Detail struct {
	Execution
	Fingerprint string `json:"fingerprint"`
	Generation  int64  `json:"generation"`
	// LeaseHolder names the execution holding (or last holding) the
	// lease: its attempt of its generation.
	LeaseHolder string `json:"lease_holder"`
	// Steps are the completed steps with their results (redacted).
	Steps []Step `json:"steps"`
	// StepsError says why the steps could not be read, or "".
	StepsError string `json:"steps_error,omitempty"`
	// Work is the name of the work that resumes the execution, or "".
	Work string `json:"work,omitempty"`
	// Input is the stored input, by its size only.
	Input string `json:"input,omitempty"`
	// LastError is the last error recorded with the execution (the reason
	// it was parked), redacted.
	LastError string `json:"last_error,omitempty"`
	// Outcome is the stored outcome of a completed execution.
	Outcome *StoredOutcome `json:"outcome,omitempty"`
	// Actions are what may be done to it now: "retry", "discard", "resume".
	Actions []string `json:"actions"`
}

// Step is one completed step.
type Step struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// StoredOutcome is a stored outcome: for one stored by the Middleware its HTTP
// status and header (values redacted but for safe fields); the body by its
// size only.
type StoredOutcome struct {
	Status int     `json:"status,omitempty"`
	Header []Field `json:"header,omitempty"`
	Body   string  `json:"body"`
}

func summarize(r idempotency.Record, now time.Time) Execution {
	st := r.ListState(now)
	e := Execution{
		Caller: r.Caller, Key: r.Key, State: st.String(), Attempt: r.Attempt,
		LeaseUntil: r.LockedUntil.UTC(), CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
		Point: cut(r.RecoveryPoint), Parked: redactText(r.Parked),
		Link: "execution?" + url.Values{"caller": {r.Caller}, "key": {r.Key}}.Encode(),
	}
	switch {
	case st == idempotency.ListCompleted:
		e.Lease = "done"
	case r.LockedUntil.After(now):
		e.Lease = "ends in " + r.LockedUntil.Sub(now).Round(time.Second).String()
	default:
		e.Lease = "ran out " + now.Sub(r.LockedUntil).Round(time.Second).String() + " ago"
	}
	return e
}

func detail(r idempotency.Record, now time.Time) Detail {
	d := Detail{
		Execution:   summarize(r, now),
		Fingerprint: cut(r.Fingerprint),
		Generation:  r.Generation,
		LeaseHolder: fmt.Sprintf("attempt %d of generation %d", r.Attempt, r.Generation),
		LastError:   redactText(r.Parked),
		Steps:       []Step{},
		Actions:     []string{},
	}
	steps, err := r.StoredSteps()
	if err != nil {
		d.StepsError = fmt.Sprintf("unreadable (%d bytes)", len(r.RecoveryData))
	}
	for name, result := range steps {
		d.Steps = append(d.Steps, Step{Name: cut(name), Data: redactData(result)})
	}
	if len(r.Resume) > 0 {
		if name, input, err := r.StoredWork(); err == nil {
			d.Work, d.Input = cut(name), body(input)
		} else {
			d.Input = body(r.Resume)
		}
	}
	if r.State == idempotency.StateCompleted {
		if status, h, b, err := r.StoredHTTPResponse(); err == nil {
			d.Outcome = &StoredOutcome{Status: status, Header: redactHeader(h), Body: body(b)}
		} else {
			d.Outcome = &StoredOutcome{Body: body(r.Response)}
		}
	}
	switch r.ListState(now) {
	case idempotency.ListParked:
		d.Actions = append(d.Actions, ActionRetry.String(), ActionDiscard.String())
	case idempotency.ListStalled:
		d.Actions = append(d.Actions, ActionResume.String())
	}
	return d
}
