package bench

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// RequestIDHeader carries the benchmark's id of a logical request, so a
// server can count the attempts of each one.
const RequestIDHeader = "X-Bench-Request"

// Hit is one attempt as a server saw it.
type Hit struct {
	At   time.Time
	Body []byte
	// Key is the Idempotency-Key header, if any.
	Key string
}

// Server is a loopback test server that records every attempt, per logical
// request, and counts new connections.
type Server struct {
	*httptest.Server

	attempts atomic.Int64
	conns    atomic.Int64

	mu     sync.Mutex
	byID   map[string][]Hit
	record bool
}

// NewServer starts a server answering with h. With record, every attempt's
// body and time are kept (for the semantics scenarios); otherwise only
// counts.
func NewServer(h http.HandlerFunc, record bool) *Server {
	s := &Server{byID: make(map[string][]Hit), record: record}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.attempts.Add(1)
		s.note(r)
		if k := r.Header["Idempotency-Key"]; len(k) > 0 {
			// It stands for a server that deduplicates keys, and says so by
			// echoing the key as the idempotency middleware does: a library
			// that sends one may resend a POST to it.
			w.Header()["Idempotency-Key"] = k
		}
		h(w, r)
	}))
	s.Server.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	return s
}

// note records the attempt under its request id.
func (s *Server) note(r *http.Request) {
	id := r.Header.Get(RequestIDHeader)
	hit := Hit{At: time.Now(), Key: r.Header.Get("Idempotency-Key")}
	if s.record && r.Body != nil {
		hit.Body, _ = io.ReadAll(io.LimitReader(r.Body, 1<<20))
	}
	s.mu.Lock()
	s.byID[id] = append(s.byID[id], hit)
	s.mu.Unlock()
}

// Attempts returns the number of attempts received.
func (s *Server) Attempts() int64 { return s.attempts.Load() }

// Conns returns the number of connections accepted.
func (s *Server) Conns() int64 { return s.conns.Load() }

// Hits returns the attempts of the logical request id.
func (s *Server) Hits(id string) []Hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Hit(nil), s.byID[id]...)
}

// AttemptsOf returns the number of attempts of the logical request id.
func (s *Server) AttemptsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID[id])
}

// Unavailable answers every request with 503.
func Unavailable(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusServiceUnavailable)
}

// newTransport returns a fresh transport for one client, so connection
// counts and pools are never shared between libraries.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}
