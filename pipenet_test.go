package retry_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
)

// pipeNet is a network in memory: an http.Server accepts the server ends of
// net.Pipe connections that an *http.Transport dials. Every wait on it is a
// wait on a channel, so a real net/http client and server run inside a
// testing/synctest bubble, with fake time.
type pipeNet struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	dials  int
	mu     sync.Mutex
}

// newPipeServer serves handler on a pipeNet and returns a plain
// *http.Transport that reaches it at any address (use "http://pipe.test/").
// Both are closed when the test ends.
func newPipeServer(t testing.TB, handler http.Handler) (*http.Transport, *pipeNet) {
	n := &pipeNet{conns: make(chan net.Conn), closed: make(chan struct{})}
	srv := &http.Server{Handler: handler}
	go srv.Serve(n)
	tr := &http.Transport{DialContext: n.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return tr, n
}

// Accept implements net.Listener.
func (n *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (n *pipeNet) Close() error {
	n.once.Do(func() { close(n.closed) })
	return nil
}

// Addr implements net.Listener.
func (n *pipeNet) Addr() net.Addr { return pipeAddr{} }

// Dials reports how many connections were dialled.
func (n *pipeNet) Dials() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dials
}

func (n *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case n.conns <- server:
		n.mu.Lock()
		n.dials++
		n.mu.Unlock()
		return client, nil
	case <-n.closed:
		return nil, &net.OpError{Op: "dial", Net: "pipe", Err: syscall.ECONNREFUSED}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe.test:80" }
