package pgstore

import (
	"bytes"
	"context"
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

func buildListQueries(schema string) listQueries {
	r := strings.NewReplacer("__SCHEMA__", schema, "@cols", recordColumns)
	return listQueries{
		// $1 cursor, $2 window size, $3 shift. The window is read from
		// the primary key index alone.
		window: r.Replace(`SELECT now() + $3::bigint * interval '1 microsecond',
	(SELECT key_hash FROM __SCHEMA__.idempotency_keys WHERE key_hash > $1 ORDER BY key_hash OFFSET $2 - 1 LIMIT 1)`),
		// $1 cursor, $2 window end (NULL: none), $3 now, $4 caller ('':
		// any), $5 key prefix, $6 state, $7 limit.
		rows: r.Replace(`SELECT key_hash, @cols FROM __SCHEMA__.idempotency_keys
WHERE key_hash > $1 AND ($2::bytea IS NULL OR key_hash <= $2) AND expires_at > $3
	AND ($4::bytea = '' OR caller = $4) AND substring(key FROM 1 FOR length($5::bytea)) = $5
	AND CASE $6::int
		WHEN 1 THEN status = 1 AND parked IS NULL AND locked_until > $3
		WHEN 2 THEN status = 1 AND parked IS NULL AND locked_until <= $3
		WHEN 3 THEN status = 1 AND parked IS NOT NULL
		ELSE status = 2 END
ORDER BY key_hash LIMIT $7`),
	}
}

// List implements idempotency.Lister. It pages in the order of the primary
// key (a hash of caller and key), so a page reads at most
// q.ScanSize() rows through that index; the cursor is the hash of
// the last row read. Two round trips.
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
	lq := s.lq
	var (
		now time.Time
		end []byte
	)
	if err := s.pool.QueryRow(ctx, lq.window, after, q.ScanSize(), s.now()).Scan(&now, &end); err != nil {
		return idempotency.ListPage{}, fmt.Errorf("pgstore: list: %w", classify(err))
	}
	limit := q.PageSize()
	rows, err := s.pool.Query(ctx, lq.rows, after, end, now, []byte(q.Caller), []byte(q.KeyPrefix), int(q.State), limit+1)
	if err != nil {
		return idempotency.ListPage{}, fmt.Errorf("pgstore: list: %w", classify(err))
	}
	defer rows.Close()
	page := idempotency.ListPage{Now: now}
	var hash []byte
	for rows.Next() {
		r, err := scanRecord(rows, &hash)
		if err != nil {
			return idempotency.ListPage{}, fmt.Errorf("pgstore: list: %w", classify(err))
		}
		if len(page.Records) == limit {
			// More match than the page holds: go on after its last.
			page.Next = hex.EncodeToString(after)
			return page, nil
		}
		page.Records = append(page.Records, r)
		after = bytes.Clone(hash)
	}
	if err := rows.Err(); err != nil {
		return idempotency.ListPage{}, fmt.Errorf("pgstore: list: %w", classify(err))
	}
	if end != nil {
		page.Next = hex.EncodeToString(end)
	}
	return page, nil
}

// Now implements idempotency.Lister: the database clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, "SELECT now() + $1::bigint * interval '1 microsecond'", s.now()).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("pgstore: now: %w", classify(err))
	}
	return now, nil
}
