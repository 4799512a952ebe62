// Package tcpproxy is a TCP proxy that its owner controls: it forwards
// the connections made to it to a target, and on demand holds their
// bytes (as a network that stalls), cuts them all (as a network or a
// broker that drops its connections), or refuses new ones. Tests and the
// demos use it to drop a client's connections at the moment they choose.
package tcpproxy

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards the TCP connections made to its address to a target.
// It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	changed  *sync.Cond // held, refusing or a link's cut changed
	links    map[*link]struct{}
	held     bool
	refusing bool
	heldUp   int // bytes from clients waiting while held
	accepted int
	refused  int
	cuts     int
	closed   bool
	wg       sync.WaitGroup
}

// link is one proxied connection: the client's and the target's ends.
type link struct {
	client, server net.Conn
	cut            bool
}

// New listens on a free port of 127.0.0.1 and forwards each connection
// made to it to target (host:port). Close it when done.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: make(map[*link]struct{})}
	p.changed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address (host:port), to dial instead of the
// target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many connections the proxy forwarded.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Refused returns how many connections the proxy closed at once because
// it was refusing them (see Refuse).
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Cuts returns how many times Cut dropped at least one connection.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Open returns how many connections are being forwarded now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Hold stops forwarding bytes, both ways, on every connection: what is
// sent meanwhile waits in the proxy, delivered by Release or dropped by
// Cut.
func (p *Proxy) Hold() { p.setHeld(true) }

// HeldBytes returns how many bytes that clients sent wait in the proxy
// while it holds: a test knows so that a client's frame (a publish, an
// ack) was sent and is held, to be dropped by Cut.
func (p *Proxy) HeldBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heldUp
}

// Release forwards again what Hold kept, and what follows.
func (p *Proxy) Release() { p.setHeld(false) }

func (p *Proxy) setHeld(held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = held
	p.changed.Broadcast()
}

// Refuse makes the proxy close every new connection at once (refuse
// true), as a target that is down, or forward them again (false).
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = refuse
}

// Cut closes every connection being forwarded, both ends, dropping the
// bytes held; it returns how many it closed. New connections are
// forwarded as before (see Refuse), and not held.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.links)
	for l := range p.links {
		p.cutLocked(l)
	}
	p.held = false
	if n > 0 {
		p.cuts++
	}
	p.changed.Broadcast()
	return n
}

// Close stops listening and cuts every connection, and returns once the
// proxy's goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

// cutLocked closes both ends of l; p.mu is held.
func (p *Proxy) cutLocked(l *link) {
	if l.cut {
		return
	}
	l.cut = true
	_ = l.client.Close()
	_ = l.server.Close()
	delete(p.links, l)
}

// accept forwards the connections made to the listener until it closes.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		refuse := p.refusing || p.closed
		if p.refusing {
			p.refused++
		}
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.links[l] = struct{}{}
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, c, s, true)
		go p.pipe(l, s, c, false)
	}
}

// pipe copies src to dst, waiting while the proxy holds, until either end
// fails or l is cut; then it cuts l.
// up says that src is the client.
func (p *Proxy) pipe(l *link, src, dst net.Conn, up bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && (!p.waitForward(l, n, up) || write(dst, buf[:n]) != nil) {
			err = io.ErrClosedPipe
		}
		if err != nil {
			p.mu.Lock()
			p.cutLocked(l)
			p.changed.Broadcast()
			p.mu.Unlock()
			return
		}
	}
}

// waitForward waits while the proxy holds n bytes read on l (from the
// client when up), and reports whether l may forward them (it was not cut
// meanwhile).
func (p *Proxy) waitForward(l *link, n int, up bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held || l.cut {
		return !l.cut
	}
	if up {
		p.heldUp += n
		defer func() { p.heldUp -= n }()
	}
	for p.held && !l.cut {
		p.changed.Wait()
	}
	return !l.cut
}

// write writes b whole to w.
func write(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}
