package mysqlstore_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenRefusesBadSettings(t *testing.T) {
	t.Parallel()
	_, err := mysqlstore.Open(nil)
	assert.Error(t, err)
	for _, p := range []string{"a-b", "a`b", strings.Repeat("x", 33), "a b"} {
		_, err := mysqlstore.Open(testConfig(t), mysqlstore.WithTablePrefix(p))
		assert.Error(t, err, p)
		_, err = mysqlstore.SchemaSQL(p)
		assert.Error(t, err, p)
	}
	ddl, err := mysqlstore.SchemaSQL("app_")
	require.NoError(t, err)
	assert.Contains(t, ddl, "`app_idempotency_keys`")
	assert.NotContains(t, ddl, "__PREFIX__")
}

// A claim without a lease or TTL, or on tables that were never made, is
// refused as permanent; a server that is not there is a transient failure
// (the Middleware answers 503).
func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	_, err := s.Claim(t.Context(), idempotency.ClaimRequest{Key: "k"})
	assert.True(t, retry.IsPermanent(err))

	missing, err := mysqlstore.Open(testConfig(t), mysqlstore.WithTablePrefix("never_made_"))
	require.NoError(t, err)
	defer missing.Close()
	_, err = missing.Get(t.Context(), "a", "k")
	assert.True(t, retry.IsPermanent(err))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(t)
	cfg.Addr = ln.Addr().String()
	require.NoError(t, ln.Close())
	down, err := mysqlstore.Open(cfg)
	require.NoError(t, err)
	defer down.Close()
	_, err = down.Claim(t.Context(), claimReq("k"))
	require.Error(t, err)
	assert.False(t, retry.IsPermanent(err), "%v", err)
}

// ListParked orders callers and keys byte-wise beyond the 1,024 bytes MySQL
// sorts BLOBs by.
func TestListParkedOrdersLongCallers(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	long := strings.Repeat("c", 5000)
	// Created in an order the sort must undo; they differ only at the end.
	for _, caller := range []string{long + "z", long + "a", long + "m"} {
		r := mustClaim(t, s, idempotency.ClaimRequest{Caller: caller, Key: "k", Fingerprint: "fp", Lease: 60e9, TTL: 3600e9}, idempotency.ClaimCreated)
		require.NoError(t, s.SaveRecoveryPoint(ctx, r.Fence(), "begin:x", nil, 60e9))
		require.NoError(t, s.Park(ctx, r.Fence(), "why"))
	}
	recs, err := s.ListParked(ctx, "", "", 0)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for i, end := range []string{"a", "m", "z"} {
		assert.True(t, strings.HasPrefix(recs[i].Caller, long), "record %d", i)
		assert.Equal(t, end, recs[i].Caller[len(long):], "record %d", i)
	}
	page, err := s.ListParked(ctx, long+"a", "k", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, "m", strings.TrimPrefix(page[0].Caller, long))
}

// A statement that never reached the server (its context had ended) fails
// the transaction as surely as one the server refused.
func TestTxStatementWithEndedContextFails(t *testing.T) {
	t.Parallel()
	s, prefix, _ := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	tx, err := s.Begin(ctx, r.Fence())
	require.NoError(t, err)
	txCtx := tx.Context(ctx)
	require.NoError(t, localWrite(txCtx, prefix, "before"))
	ended, cancel := context.WithCancel(txCtx)
	cancel()
	require.Error(t, localWrite(ended, prefix, "never"))
	require.Error(t, tx.Err())
	require.ErrorIs(t, tx.Complete(ctx, []byte("ok")), idempotency.ErrTxFailed)
	assert.False(t, written(t, s, prefix, "before"))
	g, err := s.Get(ctx, "alice", "k")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateInProgress, g.State)
}
