package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// flakyPoints is a MemoryStore whose saves of one recovery point fail once,
// as a database that is briefly out of reach.
type flakyPoints struct {
	*idempotency.MemoryStore
	point string
	fail  atomic.Bool
}

var errPointsDown = errors.New("store unreachable")

func (s *flakyPoints) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	if point == s.point && s.fail.CompareAndSwap(true, false) {
		return errPointsDown
	}
	return s.MemoryStore.SaveRecoveryPoint(ctx, f, point, data, lease)
}

// A step whose recovery point cannot be saved fails the attempt: the
// handler's answer to that failure (a 5xx) is not stored, the client gets
// 503 with Retry-After, and its retry charges once, with the same
// downstream key when the charge may have happened.
func TestAStepThatCannotBeSavedIsNotAnOutcome(t *testing.T) {
	for _, point := range []string{"begin:charge", "done:charge"} {
		t.Run(point, func(t *testing.T) {
			e := newEnv(t)
			store := &flakyPoints{MemoryStore: e.store, point: point}
			store.fail.Store(true)
			runner := idempotency.NewRunner(store, idempotency.WithClock(e.clock), idempotency.WithLease(testLease))
			dep := &dependency{}
			handler := idempotency.Middleware(runner, byTenant)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id, err := idempotency.FromContext(r.Context()).Step(r.Context(), "charge", dep.charge)
				if err != nil {
					http.Error(w, "the charge failed", http.StatusBadGateway)
					return
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write(id)
			}))
			send := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/charges", strings.NewReader("amount=10"))
				r.Header.Set("Idempotency-Key", `"k1"`)
				w := httptest.NewRecorder()
				handler.ServeHTTP(w, r)
				return w
			}
			first := send()
			assert.Equal(t, http.StatusServiceUnavailable, first.Code, first.Body.String())
			assert.NotEmpty(t, first.Header().Get("Retry-After"))

			e.clock.Add(time.Second) // past the lease the failed attempt left
			retry := send()
			assert.Equal(t, http.StatusCreated, retry.Code, retry.Body.String())
			assert.Equal(t, "ch_1", retry.Body.String())
			calls, effects := dep.count()
			assert.Equal(t, 1, effects, "one charge")
			if point == "done:charge" {
				assert.Equal(t, 2, calls, "called again with its key, as the charge may have happened")
			} else {
				assert.Equal(t, 1, calls, "the step never ran the first time")
			}
			replay := send()
			assert.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
			require.Equal(t, "ch_1", replay.Body.String())
		})
	}
}
