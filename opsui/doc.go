// Package opsui is an operator's page for exactly-once work: an
// http.Handler a service mounts (for example under /debug/exactlyonce/)
// that shows, from a Runner's store, the executions in progress, stalled,
// parked and completed, filtered by caller and key prefix and paged; one
// execution's detail with its bodies and credentials redacted; and, from
// clients registered by the service, each dependency's state, waiters and
// counts with a small chart of recent samples, each budget's tokens and
// denials, and each consumer's counts. A parked execution can be retried
// or discarded and a stalled one resumed at once.
//
// Safe by default: the handler refuses every request until it is given an
// Config.Authorize function, which it asks separately for viewing and for
// each action; actions are POSTs refused when they come from another
// origin (http.CrossOriginProtection); nothing renders a stored body or
// header value unredacted. Bad input (an invalid escape, an over-long key,
// an unknown state, a page size out of range) gets a 400 RFC 9457 problem;
// any key a store keeps, of any bytes, can be shown and acted on.
//
// Every page is server-rendered HTML (html/template, no script, no
// external asset) with a JSON twin: add ?format=json or ask for
// application/json.
//
// Mounting it takes three lines:
//
//	ui := opsui.New(opsui.Config{Runner: runner, Authorize: allowOperators})
//	mux.Handle(opsui.DefaultPath+"/", ui)
//	log.Printf("operator page on http://%s%s/", addr, opsui.DefaultPath)
package opsui
