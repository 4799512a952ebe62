package mysqlstore

import (
	"errors"

	"github.com/exactlyonce/retry"
	"github.com/go-sql-driver/mysql"
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

// transientErrors are the server's error numbers that a retry may get past:
// too many connections, out of memory, a shutdown, a lost or killed
// connection, lock waits and deadlocks, a read-only server (a failover),
// an interrupted or timed-out statement, a failed commit.
var transientErrors = map[uint16]bool{
	1040: true, 1041: true, 1053: true, 1077: true, 1078: true, 1079: true, 1080: true,
	1129: true, 1152: true, 1154: true, 1155: true, 1156: true, 1157: true,
	1158: true, 1159: true, 1160: true, 1161: true, 1180: true, 1181: true, 1184: true,
	1205: true, 1213: true, 1290: true, 1317: true, 1836: true, 1927: true, 1969: true,
	3024: true, 4031: true,
}

// permanent reports whether err will recur on every repeat of the call: an
// error the server reported that is not about the connection, the server's
// state or contention (a value it cannot take, a missing table, a refused
// login, a syntax error). Errors that never reached the server (refused or
// broken connections, timeouts, cancelled contexts, a closed pool) are
// transient.
func permanent(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch string(me.SQLState[:2]) {
	case "08", // connection exception
		"40": // transaction rollback: deadlock, serialization failure
		return false
	}
	return !transientErrors[me.Number]
}
