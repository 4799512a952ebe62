package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Record times come from the database clock plus the test shift, never from
// the process clock.
func TestTimesComeFromTheDatabaseClock(t *testing.T) {
	t.Parallel()
	s, _, shift := newStore(t)
	ctx := context.Background()
	shift.Advance(90 * time.Minute)
	dbNow := func() time.Time {
		var now time.Time
		require.NoError(t, s.Pool().QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now))
		return now
	}
	before := dbNow()
	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	after := dbNow()
	created := r.CreatedAt.Add(-90 * time.Minute)
	assert.False(t, created.Before(before), "created %v before the statement %v", created, before)
	assert.False(t, created.After(after), "created %v after the statement %v", created, after)
	assert.Equal(t, time.Minute, r.LockedUntil.Sub(r.CreatedAt))
	assert.Equal(t, time.Hour, r.ExpiresAt.Sub(r.CreatedAt))
}

// Sweepers deleting expired rows while claims replace the same rows: every
// claim creates a fresh record, nothing fails, nothing live is deleted.
func TestSweepRacesClaims(t *testing.T) {
	t.Parallel()
	s, _, shift := newStore(t)
	ctx := context.Background()
	const keys = 100
	for i := range keys {
		mustClaim(t, s, claimReq(fmt.Sprint("k", i)), idempotency.ClaimCreated)
	}
	shift.Advance(2 * time.Hour)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := s.DeleteExpired(ctx, 7)
				assert.NoError(t, err)
			}
		})
	}
	var claims sync.WaitGroup
	for w := range 4 {
		claims.Go(func() {
			for i := w; i < keys; i += 4 {
				c, err := s.Claim(ctx, claimReq(fmt.Sprint("k", i)))
				if assert.NoError(t, err) {
					assert.Equal(t, idempotency.ClaimCreated, c.Outcome)
					assert.EqualValues(t, 1, c.Record.Attempt)
				}
			}
		})
	}
	claims.Wait()
	close(stop)
	wg.Wait()
	for i := range keys {
		g, err := s.Get(ctx, "alice", fmt.Sprint("k", i))
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateInProgress, g.State)
	}
}
