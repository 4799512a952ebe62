package main

import (
	"fmt"
	"net/url"
	"sync"

	"github.com/exactlyonce/retry/internal/tcpproxy"
)

// cutsPerRun is how many times -cut drops every consumer connection in a
// scenario: once a quarter, half and three quarters of the orders shipped.
const cutsPerRun = 3

// cutter is -cut: the consumers reach their broker through a proxy that
// drops every connection cutsPerRun times mid-run, mid-handler.
type cutter struct {
	proxy *tcpproxy.Proxy
	at    []int // the reservations after which to cut

	mu   sync.Mutex
	done int
}

// newCutter starts a proxy to the broker at brokerURL, cutting at the
// quarters of orders.
func newCutter(brokerURL string, orders int) (*cutter, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return nil, fmt.Errorf("-cut: %w", err)
	}
	p, err := tcpproxy.New(u.Host)
	if err != nil {
		return nil, fmt.Errorf("-cut: start the proxy: %w", err)
	}
	c := &cutter{proxy: p}
	for k := 1; k <= cutsPerRun; k++ {
		c.at = append(c.at, orders*k/(cutsPerRun+1))
	}
	return c, nil
}

// addr is where the consumers dial instead of the broker.
func (c *cutter) addr() string { return c.proxy.Addr() }

// maybeCut drops every connection if performed reservations reached the
// next cut's mark. It is called by the handlers, so a cut lands
// mid-handler: that handler's ack is lost with its connection.
func (c *cutter) maybeCut(performed int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done < len(c.at) && performed >= c.at[c.done] {
		c.done++
		c.proxy.Cut()
	}
}

// cuts returns how many times the proxy dropped the connections.
func (c *cutter) cuts() int {
	if c == nil {
		return 0
	}
	return c.proxy.Cuts()
}

// close stops the proxy.
func (c *cutter) close() {
	if c != nil {
		_ = c.proxy.Close()
	}
}

// brokerURL returns the URL of the broker b, for the proxy.
func brokerURL(cfg config, b broker) string {
	if _, ok := b.(*natsBroker); ok {
		return cfg.NATS
	}
	return cfg.AMQP
}

// kinds returns the kinds of consumer to run: with -cut, ours only (the
// plain and mark-before consumers stop with their connection).
func kinds(cfg config) []kind {
	if cfg.Cut {
		return []kind{kindOurs}
	}
	return []kind{kindOurs, kindPlain, kindMarkBefore}
}

// cutNote says what -cut did in r, or nothing without it.
func cutNote(r result) string {
	if r.Cuts == 0 {
		return ""
	}
	return fmt.Sprintf("; every connection cut %d times, %s", r.Cuts, plural(r.Reconnects, "reconnect"))
}

// cutHeader says, in a table's header, what -cut did in r.
func cutHeader(r result) string {
	if r.Cuts == 0 {
		return ""
	}
	return fmt.Sprintf(", every consumer connection cut %d times (%s)", r.Cuts, plural(r.Reconnects, "reconnect"))
}
