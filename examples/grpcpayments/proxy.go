package main

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// fault is what the proxy does to one call.
type fault int

const (
	faultNone  fault = iota
	faultReset       // reset the connection before the request reaches the service
	faultDrop        // let the request through, then reset the connection instead of answering
)

// faultPlan decides the fault of each call: a pure function of the seed,
// the request message and how many times the proxy has seen it, so a seed
// gives the same faults to every client whatever the scheduling.
type faultPlan struct {
	seed        uint64
	drop, reset float64
}

func (p faultPlan) decide(msg []byte, seen int) fault {
	var head [16]byte
	binary.BigEndian.PutUint64(head[:8], p.seed)
	binary.BigEndian.PutUint64(head[8:], uint64(seen))
	h := sha256.New()
	h.Write(head[:])
	h.Write(msg)
	u := float64(binary.BigEndian.Uint64(h.Sum(nil)[:8])>>11) / (1 << 53)
	switch {
	case u < p.reset:
		return faultReset
	case u < p.reset+p.drop:
		return faultDrop
	}
	return faultNone
}

// HTTP/2 framing, as much of it as the proxy reads (RFC 9113).
const (
	frameHeaderLen = 9
	frameData      = 0x0
	frameHeaders   = 0x1
	clientPreface  = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
)

// proxy is a TCP proxy in front of a gRPC service that reads the HTTP/2
// frames going through: it sees each call's request message (its DATA
// frame) and the first frame of its answer (HEADERS), and injects the
// planned fault of the call by resetting the connection at one of them.
// It counts every request message it receives.
type proxy struct {
	plan     faultPlan
	upstream string

	mu   sync.Mutex
	seen map[[sha256.Size]byte]int

	attempts, resets, drops atomic.Int64
	wg                      sync.WaitGroup
}

func newProxy(plan faultPlan, upstream string) *proxy {
	return &proxy{plan: plan, upstream: upstream, seen: make(map[[sha256.Size]byte]int)}
}

// see counts one more arrival of msg and returns the count.
func (p *proxy) see(msg []byte) int {
	k := sha256.Sum256(msg)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[k]++
	return p.seen[k]
}

// serve accepts connections on ln until it is closed.
func (p *proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.handle(c) })
	}
}

// link is one client connection and its upstream connection, and the
// streams whose answer is to be dropped.
type link struct {
	client, server net.Conn
	mu             sync.Mutex
	drop           map[uint32]bool
	closed         bool
}

// kill resets both connections: the client sees its connection reset.
func (l *link) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	for _, c := range []net.Conn{l.client, l.server} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

func (p *proxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		client.Close()
		return
	}
	l := &link{client: client, server: server, drop: make(map[uint32]bool)}
	defer l.kill()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.toClient(l)
	}()
	p.toServer(l)
	<-done
}

// toServer forwards the client's frames, deciding each call's fault at its
// request message.
func (p *proxy) toServer(l *link) {
	defer l.kill()
	preface := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(l.client, preface); err != nil || string(preface) != clientPreface {
		return
	}
	if _, err := l.server.Write(preface); err != nil {
		return
	}
	forward(l.client, l.server, func(typ byte, stream uint32, payload []byte) bool {
		if typ != frameData || len(payload) < 5 {
			return true
		}
		p.attempts.Add(1)
		switch p.plan.decide(payload, p.see(payload)) {
		case faultReset:
			p.resets.Add(1)
			return false
		case faultDrop:
			l.mu.Lock()
			l.drop[stream] = true
			l.mu.Unlock()
		}
		return true
	})
}

// toClient forwards the service's frames, dropping a marked call's answer
// by resetting the connection at its first frame: the service has run it.
func (p *proxy) toClient(l *link) {
	defer l.kill()
	forward(l.server, l.client, func(typ byte, stream uint32, _ []byte) bool {
		if typ != frameHeaders {
			return true
		}
		l.mu.Lock()
		drop := l.drop[stream]
		delete(l.drop, stream)
		l.mu.Unlock()
		if drop {
			p.drops.Add(1)
			return false
		}
		return true
	})
}

// forward copies frames from src to dst while pass says so.
func forward(src, dst net.Conn, pass func(typ byte, stream uint32, payload []byte) bool) {
	var head [frameHeaderLen]byte
	for {
		if _, err := io.ReadFull(src, head[:]); err != nil {
			return
		}
		n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
		frame := make([]byte, frameHeaderLen+n)
		copy(frame, head[:])
		if _, err := io.ReadFull(src, frame[frameHeaderLen:]); err != nil {
			return
		}
		stream := binary.BigEndian.Uint32(head[5:9]) & 0x7fffffff
		if !pass(head[3], stream, frame[frameHeaderLen:]) {
			return
		}
		if _, err := dst.Write(frame); err != nil {
			return
		}
	}
}

// close waits for the proxy's connections to end (after its listener
// closed and its clients went).
func (p *proxy) close() { p.wg.Wait() }
