package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/stretchr/testify/require"
)

// A reason that is not valid text (an error quoting a key with a NUL byte
// in it) still parks the execution: the column is text, and such a reason
// used to fail the Park, so a Reconciler took the record over again on
// every pass instead of setting it aside.
func TestParkTakesAnyReason(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	c, err := s.Claim(ctx, idempotency.ClaimRequest{Caller: "a", Key: "k", Fingerprint: "fp", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	f := c.Record.Fence()
	require.NoError(t, s.SaveRecoveryPoint(ctx, f, "begin", nil, time.Minute))
	require.NoError(t, s.Park(ctx, f, "no work for key \x00\xff"))
	recs, err := s.ListParked(ctx, "", "", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "no work for key \uFFFD\uFFFD", recs[0].Parked)
}
