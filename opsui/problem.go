package opsui

import (
	"encoding/json"
	"net/http"
)

// Problem is an RFC 9457 problem detail: the body of every error the page
// answers, as application/problem+json.
type Problem struct {
	// Type is "about:blank": Title is the status's reason phrase.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is a stable, machine-readable reason (an extension member).
	Code string `json:"code"`
}

// Problem codes.
const (
	// CodeUnauthorized (403): no Authorize function was given, or it refused.
	CodeUnauthorized = "not_authorized"
	// CodeBadQuery (400): a parameter is malformed or out of range.
	CodeBadQuery = "bad_query"
	// CodeNotFound (404): no such page, or no live execution of the key.
	CodeNotFound = "not_found"
	// CodeConflict (409): the execution is not in a state the action
	// applies to (not parked, not stalled, held by another execution).
	CodeConflict = "conflict"
	// CodeNotListable (501): the Runner's store cannot list executions.
	CodeNotListable = "store_not_listable"
	// CodeStoreFailed (503): the store failed.
	CodeStoreFailed = "store_failed"
	// CodeActionFailed (502): the resumed work failed.
	CodeActionFailed = "action_failed"
	// CodeMethod (405): the page answers only GET and POST where it does.
	CodeMethod = "method_not_allowed"
)

// problemError is an error answered as a Problem.
type problemError struct{ p Problem }

func (e *problemError) Error() string { return e.p.Title + ": " + e.p.Detail }

func problem(status int, code, detail string) *problemError {
	return &problemError{Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: code}}
}

// writeProblem answers p as application/problem+json.
func writeProblem(w http.ResponseWriter, p Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
