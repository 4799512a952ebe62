package mysqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

var _ idempotency.Lister = (*Store)(nil)

// listQueries are the two statements of List: the clock and the end of the
// page's scan window, then the window's matching rows.
type listQueries struct{ window, rows string }

func (s *Store) listQueries() listQueries {
	r := strings.NewReplacer("@keys", "`"+s.prefix+"idempotency_keys`", "@cols", recordColumns, "@now", now)
	return listQueries{
		// Arguments: shift, cursor, window size - 1. The window is read
		// from the primary key alone.
		window: r.Replace("SELECT @now, (SELECT id FROM @keys WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?)"),
		// Arguments: cursor, window end (NULL: none) twice, now, caller
		// ('': any) twice, key prefix twice, state, now twice, limit.
		rows: r.Replace("SELECT id, @cols FROM @keys " +
			"WHERE id > ? AND (? IS NULL OR id <= ?) AND expires_at > ? " +
			"AND (? = '' OR caller = ?) AND LEFT(`key`, LENGTH(?)) = ? " +
			"AND CASE ? " +
			"WHEN 1 THEN status = 1 AND parked IS NULL AND locked_until > ? " +
			"WHEN 2 THEN status = 1 AND parked IS NULL AND locked_until <= ? " +
			"WHEN 3 THEN status = 1 AND parked IS NOT NULL " +
			"ELSE status = 2 END " +
			"ORDER BY id LIMIT ?"),
	}
}

// List implements idempotency.Lister. It pages in the order of the primary
// key (a hash of caller and key), so a page reads at most
// q.ScanSize() rows through that index; the cursor is the id of the
// last row read. Two round trips.
func (s *Store) List(ctx context.Context, q idempotency.ListQuery) (idempotency.ListPage, error) {
	if err := q.Validate(); err != nil {
		return idempotency.ListPage{}, err
	}
	after, err := hex.DecodeString(q.Cursor)
	if err != nil || (len(after) != 0 && len(after) != 32) {
		return idempotency.ListPage{}, fmt.Errorf("%w: malformed cursor", idempotency.ErrInvalidList)
	}
	if after == nil {
		after = []byte{}
	}
	lq := s.listQueries()
	var (
		nowUs int64
		end   []byte
	)
	if err := s.db.QueryRowContext(ctx, lq.window, s.shiftArg(), after, q.ScanSize()-1).Scan(&nowUs, &end); err != nil {
		return idempotency.ListPage{}, fmt.Errorf("mysqlstore: list: %w", classify(err))
	}
	var endArg any
	if end != nil {
		endArg = end
	}
	limit := q.PageSize()
	caller, prefix := []byte(q.Caller), []byte(q.KeyPrefix)
	rows, err := s.db.QueryContext(ctx, lq.rows, after, endArg, endArg, nowUs, caller, caller, prefix, prefix,
		int(q.State), nowUs, nowUs, limit+1)
	if err != nil {
		return idempotency.ListPage{}, fmt.Errorf("mysqlstore: list: %w", classify(err))
	}
	defer rows.Close()
	page := idempotency.ListPage{Now: time.UnixMicro(nowUs)}
	var id sql.RawBytes
	for rows.Next() {
		r, err := scanRecord(rows, &id)
		if err != nil {
			return idempotency.ListPage{}, fmt.Errorf("mysqlstore: list: %w", classify(err))
		}
		if len(page.Records) == limit {
			// More match than the page holds: go on after its last.
			page.Next = hex.EncodeToString(after)
			return page, nil
		}
		page.Records = append(page.Records, r)
		after = bytes.Clone(id)
	}
	if err := rows.Err(); err != nil {
		return idempotency.ListPage{}, fmt.Errorf("mysqlstore: list: %w", classify(err))
	}
	if end != nil {
		page.Next = hex.EncodeToString(end)
	}
	return page, nil
}

// Now implements idempotency.Lister: the database clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var us int64
	if err := s.db.QueryRowContext(ctx, "SELECT "+now, s.shiftArg()).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("mysqlstore: now: %w", classify(err))
	}
	return time.UnixMicro(us), nil
}
