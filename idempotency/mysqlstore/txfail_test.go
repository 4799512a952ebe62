package mysqlstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A handler whose statement failed and that answered 201 anyway: nothing
// it wrote commits, nothing is stored, the client gets 503, and its retry
// runs afresh.
func TestFailedStatementIsNeverCommitted(t *testing.T) {
	t.Parallel()
	s, prefix, _ := newStore(t)
	var fail atomic.Bool
	fail.Store(true)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		idempotency.MarkStarted(ctx)
		tx, _ := mysqlstore.TxFrom(ctx)
		_, _ = tx.ExecContext(ctx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES ('order')")
		if fail.Load() {
			// A duplicate key; the handler does not look at the error.
			_, _ = tx.ExecContext(ctx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES ('x'), ('x')")
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv := httptest.NewServer(idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(handler))
	defer srv.Close()
	post := func() int {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k1")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res.StatusCode
	}
	assert.Equal(t, http.StatusServiceUnavailable, post())
	assert.False(t, written(t, s, prefix, "order"), "the statement before the failure was committed")
	assert.False(t, written(t, s, prefix, "x"))
	fail.Store(false)
	assert.Equal(t, http.StatusCreated, post())
	assert.True(t, written(t, s, prefix, "order"))
}

// After a deadlock, InnoDB has rolled back the transaction and left the
// session in autocommit: every later statement of the transaction, a
// statement prepared before the deadlock included, is refused without
// reaching the server (it would commit at once), and nothing commits.
func TestStatementsAfterDeadlockAreRefused(t *testing.T) {
	t.Parallel()
	s, prefix, _ := newStore(t)
	admin, err := mysqlstore.Open(testConfig(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	c := &faultCell{s: s, prefix: prefix, admin: admin.DB()}
	c.setUp(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimReq("k1"), idempotency.ClaimCreated)
	itx, err := s.Begin(ctx, r.Fence())
	require.NoError(t, err)
	txCtx := itx.Context(ctx)
	tx, _ := mysqlstore.TxFrom(txCtx)
	require.NoError(t, localWrite(txCtx, prefix, "before"))
	st, err := tx.PrepareContext(txCtx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES (?)")
	require.NoError(t, err)
	defer st.Close()

	assert.Equal(t, uint16(1213), errNumber(c.deadlock(txCtx, t, tx)))
	assert.ErrorIs(t, localWrite(txCtx, prefix, "after"), idempotency.ErrTxFailed)
	_, err = st.ExecContext(txCtx, "prepared")
	assert.ErrorIs(t, err, idempotency.ErrTxFailed)
	var n int
	assert.ErrorIs(t, tx.QueryRowContext(txCtx, "SELECT 1").Scan(&n), idempotency.ErrTxFailed)
	assert.Equal(t, uint16(1213), errNumber(itx.Err()), "Err names the first failure")
	for _, name := range []string{"before", "after", "prepared"} {
		assert.False(t, written(t, s, prefix, name), "%s committed", name)
	}
	assert.ErrorIs(t, itx.Complete(ctx, []byte("ok")), idempotency.ErrTxFailed)
	for _, name := range []string{"before", "after", "prepared"} {
		assert.False(t, written(t, s, prefix, name), "%s committed", name)
	}
	// The connection went back to the pool taking statements again.
	require.NoError(t, s.Release(ctx, r.Fence()))
	mustClaim(t, s, claimReq("k1"), idempotency.ClaimCreated)
}
