package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ignoredKeysCallers is how many callers send the POSTs of IgnoredKeys at
// once, and ignoredKeysEvery how often a request's first attempt is
// reset after its effect (every tenth request).
const (
	ignoredKeysCallers = 25
	ignoredKeysEvery   = 10
)

// IgnoredKeysResult counts what a server that ignores Idempotency-Key did
// with n POSTs, each an effect (a charge, an issue created).
type IgnoredKeysResult struct {
	Requests int
	// Effects counts the effects done, Duplicates those done more than
	// once for one request.
	Effects, Duplicates int
	// Attempts counts the attempts the server saw, Failed the requests
	// the caller saw fail (an error, or a status other than 200).
	Attempts, Failed int
}

// IgnoredKeys sends n POSTs with the library's defaults (what its users
// run), from ignoredKeysCallers callers, to a server that ignores
// Idempotency-Key (it neither deduplicates nor echoes it, as most servers)
// and that resets the connection right after doing the effect of the
// first attempt of every tenth request, before answering. Resending such
// a request repeats its effect: never worse than not retrying means no
// duplicate.
func IgnoredKeys(ctx context.Context, lib Library, n int) IgnoredKeysResult {
	var (
		mu       sync.Mutex
		effects  = make(map[string]int)
		attempts atomic.Int64
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get(RequestIDHeader)
		mu.Lock()
		effects[id]++
		first := effects[id] == 1
		mu.Unlock()
		if i, err := strconv.Atoi(id); err == nil && first && i%ignoredKeysEvery == 0 {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // the effect is done; the answer is lost
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()
	client := lib.New(Defaults, tr)
	var (
		next   atomic.Int64
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	for range ignoredKeysCallers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				status, _, err := send(ctx, client, http.MethodPost, srv.URL, strconv.Itoa(i), []byte(`{"amount":100}`), 30*time.Second)
				if err != nil || status != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res := IgnoredKeysResult{Requests: n, Attempts: int(attempts.Load()), Failed: int(failed.Load())}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range effects {
		res.Effects += k
		res.Duplicates += k - 1
	}
	return res
}
