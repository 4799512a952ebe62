package mysqlstore_test

import (
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
