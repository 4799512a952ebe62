package mysqlstore_test

import (
	"context"
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
