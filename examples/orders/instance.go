package main

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

// instance is one process of a consumer: its connection, its handlers and,
// for ours, its Runner and retry budget. Killing it cuts its connections,
// stops its handlers where they stand and fails its store writes, as
// SIGKILL would.
type instance struct {
	name   string
	s      *scenario
	dead   atomic.Bool
	budget *retry.Budget
	// runner and consumer are ours's, for the operator page.
	runner   *idempotency.Runner
	consumer statser

	// inHand counts the deliveries a plain or mark-before instance holds
	// unsettled.
	inHand atomic.Int64

	mu     sync.Mutex
	conns  []net.Conn
	close  func()             // closes the broker client
	cancel context.CancelFunc // ends Run
	done   chan struct{}      // closed when Run returned
}

// dial dials for the broker client, keeping the connection to cut it.
func (i *instance) dial(network, addr string) (net.Conn, error) {
	if i.s.cut != nil {
		addr = i.s.cut.addr() // -cut: through the proxy
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	i.mu.Lock()
	i.conns = append(i.conns, c)
	i.mu.Unlock()
	return c, nil
}

// alive reports whether the instance runs. A handler of a killed instance
// stops where it stands until the end of the scenario, and then reports
// false: it completes nothing.
func (i *instance) alive() bool {
	if !i.dead.Load() {
		return true
	}
	i.s.frozen.Add(1)
	<-i.s.release
	return false
}

// kill kills the instance: its handlers stop at their next step, its store
// writes fail, its TCP connections are reset, its client closed, its Run
// ended.
func (i *instance) kill() {
	i.dead.Store(true)
	i.mu.Lock()
	conns := i.conns
	i.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as the kernel sends for a killed process
		}
		_ = c.Close()
	}
	if i.close != nil {
		i.close()
	}
	if i.cancel != nil {
		i.cancel()
	}
}
