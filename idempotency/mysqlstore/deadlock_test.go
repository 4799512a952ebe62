package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
)

// Claims of a new key whose INSERTs wait on another transaction's
// uncommitted insert of that key deadlock when it rolls back (InnoDB's
// duplicate-key deadlock: each holds a shared lock on the row and wants an
// exclusive one). The victim's INSERT kept nothing, so its claim reads
// again: one claim creates the record, the others find it in progress, and
// none fails.
func TestClaimsDeadlockedOnANewKeyReadAgain(t *testing.T) {
	s, prefix, _ := newStore(t)
	ctx := context.Background()
	const waiters = 3
	blocker, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer blocker.Rollback()
	_, err = blocker.ExecContext(ctx, "INSERT INTO `"+prefix+"idempotency_keys` (id, caller, `key`, fingerprint, status, attempt,"+
		" generation, locked_until, recovery_point, created_at, expires_at) VALUES (?, 'c', 'k', 'fp', 1, 1, 1, 0, '', 0, 0)",
		mysqlstore.RecordID("c", "k"))
	require.NoError(t, err)

	type result struct {
		c   idempotency.Claim
		err error
	}
	results := make(chan result, waiters)
	for range waiters {
		go func() {
			c, err := s.Claim(ctx, idempotency.ClaimRequest{Caller: "c", Key: "k", Fingerprint: "fp", Lease: time.Minute, TTL: time.Hour})
			results <- result{c, err}
		}()
	}
	// Every claim's INSERT waits for the blocker's lock (InnoDB does not
	// list a wait for an implicit lock; the server's process list shows
	// the statements); then it goes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST"+
			" WHERE INFO LIKE ?", "INSERT INTO `"+prefix+"idempotency_keys`%").Scan(&n))
		if n == waiters {
			break
		}
		require.True(t, time.Now().Before(deadline), "the claims never all waited for the blocker's lock (%d of %d)", n, waiters)
	}
	require.NoError(t, blocker.Rollback())

	var created, inProgress int
	for range waiters {
		r := <-results
		if !assert.NoError(t, r.err) {
			continue
		}
		switch r.c.Outcome {
		case idempotency.ClaimCreated:
			created++
		case idempotency.ClaimInProgress:
			inProgress++
		}
	}
	assert.Equal(t, 1, created, "claims that created the record")
	assert.Equal(t, waiters-1, inProgress, "claims that found it in progress")
}

// A fenced write is one autocommit UPDATE: it locks the record's row by
// primary key, then changes the record's entries in the secondary indexes.
// A transaction that holds a gap lock where the write's new index entry
// goes and then asks for the row makes a real deadlock; InnoDB rolls back
// the transaction that changed fewer rows, here the write, which kept
// nothing and so runs again: Complete succeeds once the other transaction
// ends, rather than fail with error 1213.
func TestFencedWriteDeadlockedRunsAgain(t *testing.T) {
	s, prefix, _ := newStore(t)
	ctx := context.Background()
	keys := "`" + prefix + "idempotency_keys`"
	// Claimed with a recovery point, the record is in the stalled index
	// from its insert on (stalled_at is its lease), and that index has no
	// other entry; Complete sets stalled_at to NULL, a new entry there.
	req := claimReq("k")
	req.Point = "p"
	rec := mustClaim(t, s, req, idempotency.ClaimCreated)
	id := mysqlstore.RecordID(rec.Caller, rec.Key)

	blocker, err := s.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer blocker.Rollback()
	// Heavy: InnoDB chooses as victim the transaction that changed fewer
	// rows, and the blocker has changed hundreds.
	const heavy = 300
	values := make([]string, heavy)
	args := make([]any, heavy)
	for i := range values {
		values[i], args[i] = "(?)", fmt.Sprintf("weight %d", i)
	}
	_, err = blocker.ExecContext(ctx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES "+strings.Join(values, ", "), args...)
	require.NoError(t, err)
	// No record has stalled_at NULL: this locking read finds none, and
	// locks the gap before the record's entry, where (NULL, id) goes,
	// without locking the record's row.
	var none int
	require.NoError(t, blocker.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+keys+
		" FORCE INDEX (idempotency_keys_stalled) WHERE stalled_at IS NULL FOR UPDATE").Scan(&none))
	require.Zero(t, none)

	done := make(chan error, 1)
	go func() { done <- s.Complete(ctx, rec.Fence(), []byte("ok")) }()
	// Complete's UPDATE changes the row (which locks it) before its index
	// entries, and then waits for the gap lock: a read of uncommitted data
	// shows the change. (information_schema's lock tables are a cache,
	// which polling them keeps from being refreshed.)
	peek, err := s.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
	require.NoError(t, err)
	defer peek.Rollback()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var status int
		require.NoError(t, peek.QueryRowContext(ctx, "SELECT status FROM "+keys+" WHERE id = ?", id).Scan(&status))
		if status == int(idempotency.StateCompleted) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Complete returned (%v) without waiting for the blocker's gap lock", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "Complete's UPDATE never changed the record's row")
	}
	require.NoError(t, peek.Rollback())
	// The blocker asks for the row: a cycle. The UPDATE is rolled back and
	// the blocker gets the row; Complete's second UPDATE waits for it.
	_, err = blocker.ExecContext(ctx, "SELECT id FROM "+keys+" WHERE id = ? FOR UPDATE", id)
	require.NoError(t, err, "the blocker was chosen as the deadlock's victim")
	require.NoError(t, blocker.Rollback())
	require.NoError(t, <-done, "Complete, whose UPDATE was the deadlock's victim")

	victim := latestDeadlockVictim(t, s)
	require.Contains(t, victim, "UPDATE "+keys+" SET status = 2", "the victim of the latest deadlock")
	got, err := s.Get(ctx, rec.Caller, rec.Key)
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, got.State)
	assert.Equal(t, []byte("ok"), got.Response)
}

// latestDeadlockVictim is the text of the transaction InnoDB rolled back in
// the latest deadlock it detected (SHOW ENGINE INNODB STATUS).
func latestDeadlockVictim(t testing.TB, s *mysqlstore.Store) string {
	t.Helper()
	var typ, name, status string
	require.NoError(t, s.DB().QueryRowContext(context.Background(), "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status))
	_, section, ok := strings.Cut(status, "LATEST DETECTED DEADLOCK")
	require.True(t, ok, "InnoDB detected no deadlock")
	section, _, _ = strings.Cut(section, "\nTRANSACTIONS\n")
	m := regexp.MustCompile(`\*\*\* WE ROLL BACK TRANSACTION \((\d+)\)`).FindStringSubmatch(section)
	require.NotNil(t, m, "no victim in the latest deadlock:\n%s", section)
	_, victim, ok := strings.Cut(section, "*** ("+m[1]+") TRANSACTION:")
	require.True(t, ok, "no transaction (%s) in the latest deadlock:\n%s", m[1], section)
	victim, _, _ = strings.Cut(victim, "\n*** ") // the locks it held and waited for
	return victim
}
