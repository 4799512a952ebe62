package mysqlstore

import "strings"

// recordColumns are the columns scanRecord reads, in order.
const recordColumns = "caller, `key`, fingerprint, status, attempt, generation, locked_until, " +
	"recovery_point, recovery_data, response, resume, parked, created_at, expires_at"

// queries holds the store's SQL with the table names filled in. @now is the
// database clock in microseconds since the Unix epoch, plus the test shift:
// it takes one argument (the shift) where it stands. Queries on one record
// find it by id, through the primary key, and match caller and key exactly.
type queries struct {
	claimRead, insert, replace, takeOver, mark                          string
	get, save, complete, release, park                                  string
	releaseUnstarted, endStartedLease                                   string
	stalledRead, deleteRead, deleteExpired, listParked, nextGenerations string
	keysTable                                                           string
	// For batches (see batch.go): claimReadMany and completeRead end with
	// "id IN " (the list follows); insertHead and insertRow make the
	// INSERT of many rows; completeMany is an UPDATE split where its
	// CASEs on id and its list of ids go.
	claimReadMany, completeRead, insertHead, insertRow string
	completeMany                                       [3]string
}

// now is the database clock, in microseconds, plus the shift argument. The
// clock of one statement is one instant. UTC_TIMESTAMP and a DATETIME
// epoch make it free of the session's time zone and of daylight saving.
const now = "(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED) + ?)"

// nowAfterRead is the database clock like now, read when the expression is
// evaluated rather than when the statement began: in a SELECT's list, after
// the rows were read. A claim decides with it whether a lease or a record
// ran out, so that its clock is never older than a write its read sees (a
// Park that ended a lease after the statement began would otherwise look
// live). SYSDATE is local time: the offset from UTC at the statement's start
// makes it UTC. (A server started with --sysdate-is-now reads the clock at
// the statement's start instead; a claim may then report a lease that ended
// a moment before as held, which a retry of the claim sees ended.)
const nowAfterRead = "(CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) - " +
	"TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), NOW(6)) AS SIGNED) + ?)"

// fencedWhere matches the live in-progress record of a fence.
// Arguments: id, caller, key, attempt, generation, shift.
const fencedWhere = "id = ? AND caller = ? AND `key` = ? AND attempt = ? AND generation = ? AND status = 1 AND expires_at > @now"

func buildQueries(prefix string) queries {
	keys := "`" + prefix + "idempotency_keys`"
	r := strings.NewReplacer("@keys", keys, "@gens", "`"+prefix+"idempotency_generations`",
		"@cols", recordColumns, "@fenced", fencedWhere)
	q := queries{
		// Arguments: shift, id, caller, key. One row always: the clock
		// once the record was read, and the record's columns, NULL when
		// there is none.
		claimRead: "SELECT @nowAfterRead, " + prefixed("t.", recordColumns) + " FROM (SELECT 1) n " +
			"LEFT JOIN @keys t ON t.id = ? AND t.caller = ? AND t.`key` = ?",
		// A plain INSERT, not INSERT IGNORE, which would also turn errors
		// other than the duplicate key into warnings (a value too long
		// would be cut short). Arguments: id, caller, key, fingerprint,
		// generation, locked_until, recovery point, resume, created_at,
		// expires_at.
		insert: "INSERT INTO @keys (id, @cols) VALUES (?, ?, ?, ?, 1, 1, ?, ?, ?, NULL, NULL, ?, NULL, ?, ?)",
		// Replaces the expired record read, as a new one. Arguments:
		// fingerprint, generation, locked_until, recovery point, resume,
		// created_at, expires_at, id, caller, key, the generation read,
		// shift.
		replace: "UPDATE @keys SET fingerprint = ?, status = 1, attempt = 1, generation = ?, locked_until = ?, " +
			"recovery_point = ?, recovery_data = NULL, response = NULL, resume = ?, parked = NULL, created_at = ?, expires_at = ? " +
			"WHERE id = ? AND caller = ? AND `key` = ? AND generation = ? AND expires_at <= @now",
		// Takes over the stale in-progress record read, if it still is.
		// Arguments: locked_until, resume (NULL: keep), recovery point
		// (given only to a record without one), id, caller, key, attempt,
		// generation, fingerprint, shift, shift.
		takeOver: "UPDATE @keys SET attempt = attempt + 1, locked_until = ?, parked = NULL, resume = COALESCE(?, resume), " +
			"recovery_point = IF(recovery_point = '', ?, recovery_point) " +
			"WHERE id = ? AND caller = ? AND `key` = ? AND attempt = ? AND generation = ? AND status = 1 AND fingerprint = ? " +
			"AND locked_until <= @now AND expires_at > @now",
		// Gives the record read, held by another execution's live lease
		// and without a recovery point, the claim's point (and resume, if
		// it has none), if it still is so; the execution stays its
		// holder's. Arguments: recovery point, resume, id, caller, key,
		// attempt, generation, fingerprint, shift, shift.
		mark: "UPDATE @keys SET recovery_point = ?, resume = COALESCE(resume, ?) " +
			"WHERE id = ? AND caller = ? AND `key` = ? AND attempt = ? AND generation = ? AND status = 1 AND fingerprint = ? " +
			"AND recovery_point = '' AND locked_until > @now AND expires_at > @now",
		// Arguments: id, caller, key, shift.
		get: "SELECT @cols FROM @keys WHERE id = ? AND caller = ? AND `key` = ? AND expires_at > @now",
		// An empty point keeps the record's point and data, if it has a
		// point (recovery_data is set first: it reads the old point).
		// Arguments: point, point, data, point, shift, lease, then the
		// fence's.
		save: "UPDATE @keys SET recovery_data = IF(? = '' AND recovery_point <> '', recovery_data, ?), " +
			"recovery_point = IF(? = '', recovery_point, ?), locked_until = @now + ? WHERE @fenced",
		// Arguments: response, then the fence's.
		complete: "UPDATE @keys SET status = 2, response = ?, resume = NULL WHERE @fenced",
		release:  "DELETE FROM @keys WHERE @fenced",
		// Release of a record without a recovery point; for one that got
		// one, endStartedLease ends its lease instead. Arguments: the
		// fence's; shift, then the fence's.
		releaseUnstarted: "DELETE FROM @keys WHERE @fenced AND recovery_point = ''",
		endStartedLease:  "UPDATE @keys SET locked_until = @now WHERE @fenced AND recovery_point <> ''",
		// Arguments: reason, shift, then the fence's.
		park: "UPDATE @keys SET parked = ?, locked_until = @now WHERE @fenced",
		// Stalled executions, oldest lease first, locked; rows another
		// transaction holds are skipped. Arguments: shift x3, the caller
		// twice (NULL: every caller), limit.
		stalledRead: "SELECT @now, id, @cols FROM @keys WHERE stalled_at <= @now AND expires_at > @now " +
			"AND (? IS NULL OR caller = ?) ORDER BY stalled_at LIMIT ? FOR UPDATE SKIP LOCKED",
		// The earliest expired rows, read without a lock. Arguments: shift,
		// limit.
		deleteRead: "SELECT id FROM @keys WHERE expires_at <= @now ORDER BY expires_at LIMIT ?",
		// Deletes the rows read that still are expired, locking them by
		// primary key as a claim does. Arguments: shift, then the ids.
		deleteExpired: "DELETE FROM @keys WHERE expires_at <= @now AND id IN ",
		// Parked rows only (an index holds them), by caller then key, after
		// the page's cursor. Arguments: shift, caller, caller, key, limit.
		listParked: "SELECT @cols FROM @keys WHERE parked_id IS NOT NULL AND expires_at > @now " +
			"AND (caller > ? OR (caller = ? AND `key` > ?)) ORDER BY caller, `key` LIMIT ?",
		// Takes a block of generations. Argument: the block's size.
		nextGenerations: "UPDATE @gens SET next = LAST_INSERT_ID(next + ?) WHERE id = 1",
		keysTable:       keys,
	}
	for _, p := range []*string{&q.claimRead, &q.insert, &q.replace, &q.takeOver, &q.mark, &q.get, &q.save, &q.complete,
		&q.release, &q.releaseUnstarted, &q.endStartedLease, &q.park, &q.stalledRead, &q.deleteRead, &q.deleteExpired, &q.listParked, &q.nextGenerations} {
		*p = strings.ReplaceAll(strings.ReplaceAll(r.Replace(*p), "@nowAfterRead", nowAfterRead), "@now", now)
	}
	// Arguments: shift, then the ids. One row at least: the clock after the
	// read, and the caller and key of each record found (NULL for none).
	q.claimReadMany = "SELECT @nowAfterRead, t.caller, t.`key` FROM (SELECT 1) n LEFT JOIN @keys t ON t.id IN "
	head, row, _ := strings.Cut(q.insert, "VALUES ")
	q.insertHead, q.insertRow = head+"VALUES ", row
	// Arguments: the ids. What became of records a batch completed.
	q.completeRead = "SELECT id, caller, `key`, attempt, generation, status, response FROM @keys WHERE id IN "
	// The fenced update of many records: the response's CASE on id goes
	// after the first part (WHEN id THEN response, ...), the shift and
	// the list of ids after the second, and the fence's CASE on id after
	// the third (WHEN id THEN caller = ? AND ..., ...), then END.
	q.completeMany = [3]string{"UPDATE @keys SET status = 2, resume = NULL, response = CASE id",
		" END WHERE status = 1 AND expires_at > @now AND id IN ",
		" AND CASE id"}
	for _, p := range []*string{&q.claimReadMany, &q.completeRead, &q.completeMany[0], &q.completeMany[1], &q.completeMany[2]} {
		*p = strings.ReplaceAll(strings.ReplaceAll(r.Replace(*p), "@nowAfterRead", nowAfterRead), "@now", now)
	}
	return q
}

// prefixed qualifies each of the comma-separated columns with p.
func prefixed(p, cols string) string {
	parts := strings.Split(cols, ", ")
	for i, c := range parts {
		parts[i] = p + c
	}
	return strings.Join(parts, ", ")
}
