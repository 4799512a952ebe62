package main

import "github.com/exactlyonce/retry/idempotency"

// This file uses Request.StartedAtClaim, which older versions lack: the
// test does not copy it into an older tree, whose seed then makes no keys
// of state m.
func init() {
	markedRequest = func(key string) idempotency.Request {
		return idempotency.Request{Caller: caller, Key: key, Fingerprint: "job:" + key, Work: "job", Input: []byte(key), StartedAtClaim: true}
	}
}
