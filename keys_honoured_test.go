package retry_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
)

// effectServer is a server that ignores idempotency keys, as most do: every
// POST that reaches it has its effect, counted by body, and then meets
// fault; a GET is answered 200.
type effectServer struct {
	*httptest.Server
	mu      sync.Mutex
	effects map[string]int
	fault   func(w http.ResponseWriter)
}

func newEffectServer(t *testing.T, fault func(w http.ResponseWriter)) *effectServer {
	s := &effectServer{effects: map[string]int{}, fault: fault}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodGet {
			io.WriteString(w, "ok")
			return
		}
		s.mu.Lock()
		s.effects[string(body)]++
		s.mu.Unlock()
		s.fault(w)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *effectServer) count(body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects[body]
}

// resetAfterEffect hijacks the connection and closes it without answering.
func resetAfterEffect(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

func statusAfterEffect(code int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

// Issue 39: go-github over our Transport made a duplicate issue on every
// connection reset after the create: the Transport gave the POST a key and
// took the key as making it safe to resend, but the server ignored it (and
// net/http itself resends a request with an Idempotency-Key header on a
// reused connection that dies before the response). With the defaults over
// a real *http.Transport, a server that ignores keys sees each POST's effect
// once, whatever goes wrong after it.
func TestAServerThatIgnoresKeysGetsNoDuplicate(t *testing.T) {
	faults := map[string]func(w http.ResponseWriter){
		"reset": resetAfterEffect,
		"502":   statusAfterEffect(http.StatusBadGateway),
		"503":   statusAfterEffect(http.StatusServiceUnavailable),
		"504":   statusAfterEffect(http.StatusGatewayTimeout),
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			srv := newEffectServer(t, fault)
			client, _ := newClient(t, retry.WithTotalTimeout(10*time.Second), retry.WithBackoff(backoff.Constant(time.Millisecond)))
			post := func(t *testing.T, body string, prepare func(*http.Request)) {
				t.Helper()
				var rd io.Reader
				if body != "" {
					rd = strings.NewReader(body)
				}
				req, _ := http.NewRequest("POST", srv.URL+"/issues", rd)
				if prepare != nil {
					prepare(req)
				}
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				} else {
					assert.ErrorIs(t, err, retry.ErrNotIdempotent)
				}
			}
			warm := func(t *testing.T) { // a GET leaves a connection to reuse
				resp, err := client.Get(srv.URL)
				require.NoError(t, err)
				readAll(t, resp)
			}
			post(t, "new connection", nil)
			warm(t)
			post(t, "reused connection", nil)
			warm(t)
			post(t, "", nil) // no body
			warm(t)
			post(t, "the caller's key", func(r *http.Request) { r.Header.Set("Idempotency-Key", `"mine"`) })
			for _, body := range []string{"new connection", "reused connection", "", "the caller's key"} {
				assert.Equal(t, 1, srv.count(body), "effects of %q", body)
			}
		})
	}
}

// chargeServer runs our idempotency middleware; the first time a key
// arrives, its charge is made and stored, and the connection is then reset
// before the answer.
func chargeServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var charges atomic.Int64
	mw := idempotency.Middleware(idempotency.NewRunner(nil), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			idempotency.MarkStarted(r.Context())
			charges.Add(1)
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "charged")
		}))
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		first := !seen[key] && r.URL.Path == "/flaky"
		seen[key] = true
		mu.Unlock()
		if first {
			mw.ServeHTTP(httptest.NewRecorder(), r)
			resetAfterEffect(w)
			return
		}
		mw.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &charges
}

// Our middleware shows, on every keyed answer, that it honours keys: once a
// host has answered one keyed request, a POST to it that meets a reset after
// its effect is retried, and its retry gets the stored outcome.
func TestOurMiddlewareShowsItHonoursKeys(t *testing.T) {
	srv, charges := chargeServer(t)
	client, _ := newClient(t, retry.WithTotalTimeout(10*time.Second), retry.WithBackoff(backoff.Constant(time.Millisecond)))
	resp, err := client.Post(srv.URL+"/calm", "text/plain", strings.NewReader("first"))
	require.NoError(t, err)
	assert.Equal(t, "charged", readAll(t, resp))
	for range 20 {
		// The retry that gets the stored outcome is net/http's own on a
		// reused connection, or the Transport's: either is safe now.
		resp, err := client.Post(srv.URL+"/flaky", "text/plain", strings.NewReader("charge"))
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"), "a second copy got the stored outcome")
		assert.Equal(t, "charged", readAll(t, resp))
	}
	assert.Equal(t, int64(21), charges.Load(), "every charge once")
}

// The first POST to a host that has not answered a keyed request yet is
// not retried after a reset, even against our middleware: nothing has shown
// yet that the host honours keys. WithKeysHonoured says so from the start.
func TestWithKeysHonouredTrustsTheHostsItNames(t *testing.T) {
	srv, charges := chargeServer(t)
	client, _ := newClient(t, retry.WithTotalTimeout(10*time.Second), retry.WithBackoff(backoff.Constant(time.Millisecond)))
	_, err := client.Post(srv.URL+"/flaky", "text/plain", strings.NewReader("charge"))
	assert.ErrorIs(t, err, retry.ErrNotIdempotent)
	assert.Equal(t, int64(1), charges.Load())

	for _, named := range []string{"host:port", "name"} {
		srv, charges := chargeServer(t)
		host := strings.TrimPrefix(srv.URL, "http://")
		opt := retry.WithKeysHonoured(host, "more.test")
		if named == "name" {
			name, _, _ := net.SplitHostPort(host)
			opt = retry.WithKeysHonoured(name) // every port
		}
		client, _ := newClient(t, retry.WithTotalTimeout(10*time.Second), retry.WithBackoff(backoff.Constant(time.Millisecond)),
			retry.WithKeysHonoured("other.test"), opt)
		resp, err := client.Post(srv.URL+"/flaky", "text/plain", strings.NewReader("charge"))
		require.NoError(t, err, named)
		assert.Equal(t, "charged", readAll(t, resp))
		assert.Equal(t, int64(1), charges.Load())
	}
}

// A host's evidence is its own: a host that echoes keys does not make
// another host's resets safe to retry, and the Transport remembers each.
func TestKeyEvidenceIsPerHost(t *testing.T) {
	var sends sync.Map // host -> *atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n, _ := sends.LoadOrStore(r.URL.Host, new(atomic.Int32))
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if strings.HasPrefix(r.URL.Path, "/reset") {
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		}
		n.(*atomic.Int32).Add(1)
		h := http.Header{}
		if r.URL.Host == "echoes.test" {
			h["Idempotency-Key"] = []string{strings.Trim(r.Header.Get("Idempotency-Key"), `"`)} // unquoted: still the key
		}
		return &http.Response{StatusCode: 201, Header: h, Body: http.NoBody, Request: r}, nil
	})
	var attempts atomic.Int32
	tr := retry.NewTransport(base, retry.WithBackoff(backoff.Constant(time.Millisecond)), onAttempt(func(retry.Attempt) { attempts.Add(1) }))
	client := &http.Client{Transport: tr}
	for _, host := range []string{"echoes.test", "ignores.test"} {
		resp, err := client.Post("http://"+host+"/", "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		resp.Body.Close()
	}
	for host, want := range map[string]int32{"echoes.test": retry.DefaultMaxAttempts, "ignores.test": 1} {
		attempts.Store(0)
		_, err := client.Post("http://"+host+"/reset", "text/plain", strings.NewReader("x"))
		require.Error(t, err)
		assert.Equal(t, want, attempts.Load(), host)
		if want == 1 {
			assert.True(t, errors.Is(err, retry.ErrNotIdempotent), "%v", err)
		}
	}
}
