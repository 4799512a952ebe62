package retry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// scripted is a handler that answers with the statuses of script in turn
// (the last one repeats), with headers per answer, and records what it saw.
// It stands for a server that deduplicates keys: it echoes a request's
// Idempotency-Key on its answer, as our middleware does, unless
// ignoresKeys.
type scripted struct {
	mu          sync.Mutex
	script      []int
	headers     map[int]http.Header
	body        []byte
	reqs        []recorded
	ignoresKeys bool
	// clk, if set, times the requests; else the time package does.
	clk interface{ Now() time.Time }
}

// recorded is one request as the server saw it.
type recorded struct {
	method, key string
	body        []byte
	at          time.Time
}

func newScripted(script ...int) *scripted {
	return &scripted{script: script, headers: map[int]http.Header{}}
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	at := time.Now()
	if s.clk != nil {
		at = s.clk.Now()
	}
	s.reqs = append(s.reqs, recorded{method: r.Method, key: r.Header.Get("Idempotency-Key"), body: body, at: at})
	code, h := s.script[min(n, len(s.script)-1)], s.headers[n]
	echo := !s.ignoresKeys
	s.mu.Unlock()
	if k := r.Header["Idempotency-Key"]; echo && len(k) > 0 {
		w.Header()["Idempotency-Key"] = k
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	w.Write(s.body)
}

func (s *scripted) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

// eachBase runs behaviour once over net/http's Transport and once over a
// custom RoundTripper, both serving a fresh scripted handler, in a synctest
// bubble of its own (fake time).
func eachBase(t *testing.T, script []int, behaviour func(t *testing.T, base http.RoundTripper, s *scripted)) {
	for _, kind := range []string{"net/http", "custom"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScripted(script...)
				behaviour(t, bases(t, s.serve)[kind], s)
			})
		})
	}
}

func TestEveryBaseHonoursRetryAfterAsAFloor(t *testing.T) {
	eachBase(t, []int{503, 200}, func(t *testing.T, base http.RoundTripper, s *scripted) {
		s.headers[0] = http.Header{"Retry-After": {"2"}}
		client := &http.Client{Transport: retry.NewTransport(base, retry.WithBackoff(backoff.Constant(time.Millisecond)))}
		resp, err := client.Get("http://pipe.test/")
		require.NoError(t, err)
		readAll(t, resp)
		seen := s.requests()
		require.Len(t, seen, 2)
		assert.Equal(t, 2*time.Second, seen[1].at.Sub(seen[0].at))
	})
}

func TestEveryBaseHandsBackARetryAfterPastTheDeadline(t *testing.T) {
	eachBase(t, []int{503}, func(t *testing.T, base http.RoundTripper, s *scripted) {
		s.headers[0] = http.Header{"Retry-After": {"3600"}}
		s.body = []byte("later")
		client := &http.Client{Transport: retry.NewTransport(base, retry.WithTotalTimeout(2*time.Second),
			retry.WithMaxRetryAfter(2*time.Hour))}
		start := time.Now()
		resp, err := client.Get("http://pipe.test/")
		require.NoError(t, err)
		assert.Equal(t, "later", readAll(t, resp))
		assert.Zero(t, time.Since(start), "handed back at once")
		assert.Len(t, s.requests(), 1)
	})
}

func TestEveryBaseSendsOneKeyAndTheWholeBodyOnEveryAttempt(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64)
	eachBase(t, []int{503, 502, 201}, func(t *testing.T, base http.RoundTripper, s *scripted) {
		client := &http.Client{Transport: retry.NewTransport(base)}
		resp, err := client.Post("http://pipe.test/", "application/octet-stream", bytes.NewReader(payload))
		require.NoError(t, err)
		readAll(t, resp)
		assert.Equal(t, 201, resp.StatusCode)
		seen := s.requests()
		require.Len(t, seen, 3)
		assert.Regexp(t, `^"[0-9a-f-]{36}"$`, seen[0].key)
		for _, r := range seen {
			assert.Equal(t, seen[0].key, r.key)
			assert.Equal(t, payload, r.body)
		}
	})
}

func TestEveryBaseMakesOneAttemptInsideDo(t *testing.T) {
	eachBase(t, []int{503, 503, 201}, func(t *testing.T, base http.RoundTripper, s *scripted) {
		client := &http.Client{Transport: retry.NewTransport(base)}
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			return post(ctx, client, "http://pipe.test/charge")
		})
		require.NoError(t, err)
		seen := s.requests()
		require.Len(t, seen, 3, "one attempt of the Transport per attempt of the loop")
		assert.NotEmpty(t, seen[0].key)
		assert.Equal(t, seen[0].key, seen[1].key)
		assert.Equal(t, seen[0].key, seen[2].key)
	})
}

func TestEveryBaseKeepsTheBudgetBoundInAnOutage(t *testing.T) {
	eachBase(t, []int{503}, func(t *testing.T, base http.RoundTripper, s *scripted) {
		budget := retry.NewBudget(0.1, 1, 20)
		client := &http.Client{Transport: retry.NewTransport(base, retry.WithBudget(budget), noRideThrough)}
		start := time.Now()
		const requests = 200
		for range requests {
			resp, err := client.Get("http://pipe.test/")
			require.NoError(t, err)
			readAll(t, resp)
		}
		retries := uint64(len(s.requests()) - requests)
		assert.Equal(t, budget.Stats().RetriesAllowed, retries)
		assert.LessOrEqual(t, retries, floorBound(retry.DefaultBudgetCapacity, retry.DefaultBudgetFloor, time.Since(start)))
		assert.Equal(t, uint64(requests), budget.Stats().Requests)
	})
}

func TestEveryBaseDrainsARetriedResponse(t *testing.T) {
	eachBase(t, []int{503, 503, 200}, func(t *testing.T, base http.RoundTripper, s *scripted) {
		s.body = bytes.Repeat([]byte("x"), 16<<10)
		counted := &countingBase{base: base}
		client := &http.Client{Transport: retry.NewTransport(counted)}
		resp, err := client.Get("http://pipe.test/")
		require.NoError(t, err)
		assert.Len(t, readAll(t, resp), 16<<10)
		assert.Equal(t, []string{"read to the end, closed", "read to the end, closed"}, counted.fates(2),
			"each retried response was read to its end, so its connection can be reused")
	})
}

// countingBase wraps every response body to tell what became of it.
type countingBase struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []*fateBody
}

func (c *countingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		b := &fateBody{ReadCloser: resp.Body}
		resp.Body = b
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
	}
	return resp, err
}

// fates describes the first n bodies.
func (c *countingBase) fates(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.bodies[:min(n, len(c.bodies))] {
		out = append(out, b.fate())
	}
	return out
}

type fateBody struct {
	io.ReadCloser
	mu          sync.Mutex
	eof, closed bool
}

func (b *fateBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.eof = b.eof || err == io.EOF
	b.mu.Unlock()
	return n, err
}

func (b *fateBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.ReadCloser.Close()
}

func (b *fateBody) fate() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("%s, %s", map[bool]string{true: "read to the end", false: "not read to the end"}[b.eof],
		map[bool]string{true: "closed", false: "open"}[b.closed])
}
