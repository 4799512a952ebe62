package pgstore

import (
	"errors"

	"github.com/exactlyonce/retry"
	"github.com/jackc/pgx/v5/pgconn"
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

// permanent reports whether err will recur on every repeat of the call: an
// error the server reported that is not about the connection, the server's
// state or contention (a value it cannot take, a limit, a missing table or
// function, a failed constraint, a refused login). Errors that never
// reached the server (refused or broken connections, timeouts, cancelled
// contexts, a closed pool) are transient: a retry may get past them.
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", // connection exception
		"40", // transaction rollback: serialization failure, deadlock
		"53", // insufficient resources: too many connections, out of memory, disk full
		"57", // operator intervention: statement timeout, cancel, shutdown
		"58": // system error: I/O
		return false
	}
	switch pgErr.Code {
	case "25P02", // in_failed_sql_transaction: the echo of an earlier failure, classified on its own
		"55P03", // lock_not_available
		"55006", // object_in_use
		"25006", // read_only_sql_transaction: connected to a standby during a failover
		"25P03", // idle_in_transaction_session_timeout
		"72000": // snapshot_too_old
		return false
	}
	return true
}
