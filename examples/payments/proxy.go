package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// fault is what the proxy does to one attempt.
type fault int

const (
	faultNone  fault = iota
	faultReset       // reset the connection before forwarding
	faultDrop        // forward, then reset the connection instead of answering
)

// faultPlan decides the fault and latency of each attempt.
type faultPlan struct {
	seed    uint64
	drop    float64
	reset   float64
	latency time.Duration
}

// decide returns the fault and the added latency for the seen-th time (from
// 1) the proxy receives body. It is a pure function of its arguments and the
// plan, so the same seed injects the same faults into the same charges
// whatever the order in which concurrent requests arrive.
func (p faultPlan) decide(body []byte, seen int) (fault, time.Duration) {
	var head [16]byte
	binary.BigEndian.PutUint64(head[:8], p.seed)
	binary.BigEndian.PutUint64(head[8:], uint64(seen))
	h := sha256.New()
	h.Write(head[:])
	h.Write(body)
	sum := h.Sum(nil)
	u := unit(sum[:8])
	delay := time.Duration(unit(sum[8:16]) * float64(p.latency))
	switch {
	case u < p.reset:
		return faultReset, delay
	case u < p.reset+p.drop:
		return faultDrop, delay
	}
	return faultNone, delay
}

// unit maps 8 bytes to a uniform number in [0, 1).
func unit(b []byte) float64 {
	return float64(binary.BigEndian.Uint64(b)>>11) / (1 << 53)
}

// maxBody bounds the request and response bodies the proxy buffers.
const maxBody = 1 << 20

// proxy is an HTTP proxy in front of one upstream that injects faults.
// It counts every attempt it receives.
type proxy struct {
	plan     faultPlan
	upstream string // base URL
	client   *http.Client

	mu   sync.Mutex
	seen map[[sha256.Size]byte]int

	attempts, resets, drops atomic.Int64
}

func newProxy(plan faultPlan, upstream string) *proxy {
	return &proxy{
		plan:     plan,
		upstream: upstream,
		// A client of its own that never retries: the faults are the proxy's.
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second},
		seen:   make(map[[sha256.Size]byte]int),
	}
}

// see counts one more arrival of body and returns the count.
func (p *proxy) see(body []byte) int {
	k := sha256.Sum256(body)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[k]++
	return p.seen[k]
}

// ServeHTTP forwards r to the upstream, injecting the planned fault.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "proxy: reading the request: "+err.Error(), http.StatusBadGateway)
		return
	}
	p.attempts.Add(1)
	f, delay := p.plan.decide(body, p.see(body))
	if !pause(r.Context(), delay) {
		return
	}
	if f == faultReset {
		p.resets.Add(1)
		abort(w)
		return
	}
	status, header, respBody, err := p.forward(r, body)
	if err != nil {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	if f == faultDrop {
		p.drops.Add(1)
		abort(w)
		return
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	w.Write(respBody)
}

// forward sends the request to the upstream and reads the whole response.
func (p *proxy) forward(r *http.Request, body []byte) (int, http.Header, []byte, error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, v := range r.Header {
		out.Header[k] = v
	}
	resp, err := p.client.Do(out)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, respBody, nil
}

// close releases the proxy's upstream connections.
func (p *proxy) close() {
	p.client.CloseIdleConnections()
}

// abort resets the client's connection: the client sees "connection reset"
// and no response.
func abort(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server closes the connection
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// pause waits d, or until ctx ends (then it reports false).
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
