package redisstore

import (
	"errors"
	"strings"

	"github.com/exactlyonce/retry"
	"github.com/redis/go-redis/v9"
)

// classify marks err with retry.Permanent when repeating the call
// would fail the same way, so that the Middleware never answers it with a
// retryable 503. nil stays nil.
func classify(err error) error {
	if err == nil || !permanent(err) {
		return err
	}
	return retry.Permanent(err)
}

// transientReplies start the error replies of a server that may serve the
// same call later: loading its data, busy with a script, failing over, out
// of memory, refusing writes, or full of clients.
var transientReplies = []string{
	"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "OOM", "NOREPLICAS",
	"MOVED", "ASK", "NOSCRIPT", "UNBLOCKED", "MISCONF", "ERR max number of clients",
}

// permanent reports whether err will recur on every repeat of the call: an
// error reply of the server that is not about its state (a script error, a
// key of the wrong type). Errors that never reached the server, or whose
// reply was lost (refused or broken connections, timeouts, cancelled
// contexts, a closed client), are transient: a retry may get past them.
func permanent(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) || errors.Is(err, redis.Nil) {
		return false
	}
	msg := rerr.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return true
}
