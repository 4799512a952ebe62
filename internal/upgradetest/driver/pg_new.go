//go:build !upgradeold

package main

import "github.com/exactlyonce/retry/idempotency/pgstore"

// outboxMessage is the message a Relay delivers (see compat_new.go).
type outboxMessage = pgstore.OutboxMessage
