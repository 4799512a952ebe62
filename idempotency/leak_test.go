package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leaked is what a handler kept after returning: its ResponseWriter and
// request body, used later by a goroutine it started.
type leaked struct {
	w    http.ResponseWriter
	body io.Reader
}

// A handler that keeps w and r.Body after it returns can never reach the
// next request's body, response or stored replay through them: a late
// write fails, a late read fails with http.ErrBodyReadAfterClose, as with
// net/http.
func TestLateUseOfWriterAndBodyTouchesNoOtherRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kept := make(chan leaked, 1)
	// late runs in the goroutine a handler started: it uses what the previous
	// request's handler kept, while the current request runs.
	type lateResult struct {
		writeErr error
		read     string
		readErr  error
	}
	late := func() lateResult {
		k := <-kept
		var res lateResult
		k.w.Header().Set("X-Leak", "from the previous request")
		_, res.writeErr = io.WriteString(k.w, "LEAKED")
		k.w.WriteHeader(http.StatusTeapot)
		b := make([]byte, 64)
		n, err := k.body.Read(b)
		res.read, res.readErr = string(b[:n]), err
		return res
	}
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Idempotency-Key"), "keeper") {
			_, _ = io.WriteString(w, "kept")
			kept <- leaked{w, r.Body} // used after this handler returns
			return
		}
		// The victim: the late goroutine acts before this handler reads its
		// body and after it set its header.
		w.Header().Set("Content-Type", "text/plain")
		done := make(chan lateResult)
		go func() { done <- late() }()
		res := <-done
		assert.Error(t, res.writeErr, "late Write")
		assert.ErrorIs(t, res.readErr, http.ErrBodyReadAfterClose, "late Read")
		assert.Empty(t, res.read, "late Read got another request's body")
		body, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "charged "+string(body))
	}))
	for i := range 50 {
		keeper := do(h, "keeper's body", withKey(fmt.Sprint("keeper-", i)))
		require.Equal(t, "kept", keeper.Body.String())
		card := fmt.Sprintf("card 4111-%04d", i)
		victim := do(h, card, withKey(fmt.Sprint("victim-", i)), withTenant("other tenant"))
		require.Equal(t, http.StatusCreated, victim.Code, "pair %d", i)
		require.Equal(t, "charged "+card, victim.Body.String(), "pair %d", i)
		require.Empty(t, victim.Header().Get("X-Leak"), "pair %d", i)
		replay := do(h, card, withKey(fmt.Sprint("victim-", i)), withTenant("other tenant"))
		sameResponse(t, victim, replay)
	}
}

// Under the race detector: many requests at once, each handler leaving a
// goroutine that keeps writing to its ResponseWriter and reading its body
// once the request is over, while other requests reuse the Middleware's
// buffers. No data race, and every response is its own.
func TestLeakedWriterAndBodyRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		starts sync.Map // key -> chan struct{}: closed when the request is over
		lates  sync.WaitGroup
		lateOK atomic.Int64 // late writes that did not fail
	)
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Body", string(body))
		_, _ = w.Write(body)
		start := make(chan struct{})
		starts.Store(r.Header.Get("Idempotency-Key"), start)
		lates.Go(func() {
			<-start
			b := make([]byte, 8)
			for range 200 {
				w.Header().Set("X-Late", "late")
				if _, err := w.Write([]byte("late")); err == nil {
					lateOK.Add(1)
				}
				w.WriteHeader(http.StatusInternalServerError)
				if n, _ := r.Body.Read(b); n > 0 {
					lateOK.Add(1)
				}
				_ = r.Body.Close()
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
				runtime.Gosched()
			}
		})
	}))
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				key := fmt.Sprint(g, "-", i)
				body := fmt.Sprintf("tenant %d request %d", g, i)
				res := do(h, body, withKey(key), withTenant(fmt.Sprint(g)))
				if start, ok := starts.Load(key); ok {
					close(start.(chan struct{}))
				}
				assert.Equal(t, http.StatusOK, res.Code)
				assert.Equal(t, body, res.Body.String())
				assert.Equal(t, body, res.Header().Get("X-Body"))
				assert.Empty(t, res.Header().Get("X-Late"))
			}
		})
	}
	wg.Wait()
	lates.Wait()
	assert.Zero(t, lateOK.Load(), "late writes or reads that went somewhere")
	for g := range 16 {
		body := fmt.Sprintf("tenant %d request %d", g, 7)
		replay := do(h, body, withKey(fmt.Sprint(g, "-", 7)), withTenant(fmt.Sprint(g)))
		assert.Equal(t, body, replay.Body.String())
		assert.Equal(t, body, replay.Header().Get("X-Body"))
		assert.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	}
}
