package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// keysByPath records the Idempotency-Key (and X-Request-Key) of every
// request by path, answering with the statuses of script in turn.
type keysByPath struct {
	mu     sync.Mutex
	keys   map[string][]string
	custom map[string][]string
	script []int
	n      int
}

func newKeysServer(t *testing.T, script ...int) (*httptest.Server, *keysByPath) {
	k := &keysByPath{keys: map[string][]string{}, custom: map[string][]string{}, script: script}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		k.mu.Lock()
		k.keys[r.URL.Path] = append(k.keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
		k.custom[r.URL.Path] = append(k.custom[r.URL.Path], r.Header.Get("X-Request-Key"))
		code := 200
		if len(k.script) > 0 {
			code = k.script[min(k.n, len(k.script)-1)]
		}
		k.n++
		k.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv, k
}

func (k *keysByPath) of(path string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys[path]...)
}

func (k *keysByPath) customOf(path string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.custom[path]...)
}

// post sends a POST through client and turns a 5xx into an error.
func post(ctx context.Context, client *http.Client, url string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader("x"))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// Inside Do, the request's own policy wins: no key where it says none, the
// header it names.
func TestRequestPolicyWinsInsideDo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    retry.Option
		keyed  bool
		header string
	}{
		{"WithoutRetries", retry.WithoutRetries(), false, ""},
		{"WithIdempotent", retry.WithIdempotent(), false, ""},
		{"WithoutKeys", retry.WithoutKeys(), false, ""},
		{"WithKeyHeader", retry.WithKeyHeader("X-Request-Key"), true, "X-Request-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, keys := newKeysServer(t, 503, 200)
			client, _ := newClient(t)
			err := retry.Do(t.Context(), func(ctx context.Context) error {
				return post(retry.NewContext(ctx, tc.opt), client, srv.URL+"/charge")
			}, retry.WithClock(newAutoClock()))
			require.NoError(t, err)
			std, custom := keys.of("/charge"), keys.customOf("/charge")
			require.Len(t, std, 2, "the outer loop made two attempts, the Transport one each")
			switch {
			case !tc.keyed:
				assert.Equal(t, []string{"", ""}, std, "no key where the request's policy says none")
			case tc.header != "":
				assert.Equal(t, []string{"", ""}, std, "the key goes under the request's header")
				assert.NotEmpty(t, custom[0])
				assert.Equal(t, custom[0], custom[1], "and stays the same on every attempt of the loop")
			}
		})
	}
}

// An empty Idempotency-Key is no key: the Transport makes one.
func TestEmptyCallerKeyIsReplacedByAGeneratedOne(t *testing.T) {
	for _, empty := range []string{"", `""`, "  "} {
		t.Run(fmt.Sprintf("%q", empty), func(t *testing.T) {
			srv := newScriptServer(t, 503, 201)
			client, _ := newClient(t, retry.WithClock(newAutoClock()))
			var rep retry.Report
			req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", srv.URL, strings.NewReader("x"))
			req.Header.Set("Idempotency-Key", empty)
			resp, err := client.Do(req)
			require.NoError(t, err)
			readAll(t, resp)
			reqs := srv.requests()
			require.Len(t, reqs, 2)
			assert.Regexp(t, `^"[0-9a-f-]{36}"$`, reqs[0].key, "a key of the Transport's")
			assert.Equal(t, reqs[0].key, reqs[1].key)
			assert.Equal(t, reqs[0].key, rep.IdempotencyKey)
			assert.Equal(t, empty, req.Header.Get("Idempotency-Key"), "the caller's request is not modified")
		})
	}
	t.Run("WithoutIdempotencyKeys", func(t *testing.T) {
		srv := newScriptServer(t, 503, 201)
		client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithoutKeys())
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", "")
		resp, err := client.Do(req)
		require.NoError(t, err)
		readAll(t, resp)
		assert.Len(t, srv.requests(), 1, "an empty key does not make a POST safe to repeat")
	})
}

// Inside Do, a key belongs to its request, not to the order requests
// arrive in: concurrent POSTs to /a and /b keep their keys across attempts.
func TestLoopKeysStayWithTheirRequests(t *testing.T) {
	srv, keys := newKeysServer(t)
	client, _ := newClient(t)
	attempt := 0
	err := retry.Do(t.Context(), func(ctx context.Context) error {
		attempt++
		order := []string{"/a", "/b"}
		if attempt == 2 {
			order = []string{"/b", "/a"} // the other order this time
		}
		for _, p := range order {
			if err := post(ctx, client, srv.URL+p); err != nil {
				return err
			}
		}
		if attempt == 1 {
			return fmt.Errorf("the operation failed after both calls")
		}
		return nil
	}, retry.WithClock(newAutoClock()))
	require.NoError(t, err)
	a, b := keys.of("/a"), keys.of("/b")
	require.Len(t, a, 2)
	require.Len(t, b, 2)
	assert.Equal(t, a[0], a[1], "/a has the same key on both attempts")
	assert.Equal(t, b[0], b[1], "/b has the same key on both attempts")
	assert.NotEqual(t, a[0], b[0])
}

// Requests to the same URL within one attempt are told apart by their
// rank, which holds from attempt to attempt.
func TestLoopKeysRankRequestsToTheSameURL(t *testing.T) {
	srv, keys := newKeysServer(t)
	client, _ := newClient(t)
	attempt := 0
	err := retry.Do(t.Context(), func(ctx context.Context) error {
		attempt++
		for range 2 {
			if err := post(ctx, client, srv.URL+"/charge"); err != nil {
				return err
			}
		}
		if attempt == 1 {
			return fmt.Errorf("failed after both charges")
		}
		return nil
	}, retry.WithClock(newAutoClock()))
	require.NoError(t, err)
	k := keys.of("/charge")
	require.Len(t, k, 4)
	assert.NotEqual(t, k[0], k[1], "two charges in one attempt are two requests")
	assert.Equal(t, k[0:2], k[2:4], "and keep their keys on the next attempt")
}

// Work detached from the loop is outside it: it takes no key of the loop's
// and is retried on its own.
func TestDetachedWorkIsOutsideTheLoop(t *testing.T) {
	srv, keys := newKeysServer(t)
	client, _ := newClient(t)
	attempt := 0
	var detachedErr error
	err := retry.Do(t.Context(), func(ctx context.Context) error {
		attempt++
		if attempt == 1 {
			detachedErr = post(context.WithoutCancel(ctx), client, srv.URL+"/a")
		}
		if err := post(ctx, client, srv.URL+"/a"); err != nil {
			return err
		}
		if attempt == 1 {
			return fmt.Errorf("failed")
		}
		return nil
	}, retry.WithClock(newAutoClock()))
	require.NoError(t, err)
	require.NoError(t, detachedErr)
	k := keys.of("/a")
	require.Len(t, k, 3)
	assert.Equal(t, k[1], k[2], "the attached request keeps its key: the detached one took none of the loop's")
	assert.NotEqual(t, k[0], k[1])
}
