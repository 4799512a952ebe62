//go:build upgradeold

package main

import "github.com/exactlyonce/retry/idempotency/pgstore"

// outboxMessage is the old version's name of the message a Relay delivers
// (see compat_old.go).
type outboxMessage = pgstore.Message
