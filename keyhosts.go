package retry

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// replayedHeader is the response header with which a server that
// deduplicates keys says it replays the outcome of an earlier request with
// the same key (our idempotency middleware, Stripe).
const replayedHeader = "Idempotent-Replayed"

// maxKeyHosts bounds the hosts a Transport remembers as honouring or
// ignoring keys; past it, one it knows is forgotten for each new one (it
// shows it again with its next keyed answer). Hosts it knows nothing of yet
// are kept only while keyed requests to them are out.
const maxKeyHosts = 4096

// keyState is what a host has shown of its handling of idempotency keys.
type keyState uint8

const (
	keysUnknown  keyState = iota // nothing yet
	keysHonoured                 // an answer echoed a key, or said it replayed one
	keysIgnored                  // an answer of the server's own to a keyed request did neither
)

// keyHost is what a Transport knows of one host's key handling.
type keyHost struct {
	state keyState
	// out counts the keyed requests sent to the host while its state was
	// unknown whose answer has not come yet: each may bring the evidence.
	out int
	// settled, made by the first request that waits for the evidence, is
	// closed when the state leaves keysUnknown or out falls to zero.
	settled chan struct{}
}

// keyHosts are what the hosts a Transport sent keyed requests to have
// shown of their handling of keys, and the requests out to those whose
// handling is unknown yet. Safe for concurrent use; the zero value knows
// none. A host it knows is looked up under a read lock; an entry is made
// only for a keyed request to a host it does not know.
type keyHosts struct {
	mu    sync.RWMutex
	hosts map[string]*keyHost // an entry's state is known, or its out > 0
}

// honours reports whether host has shown it honours keys.
func (k *keyHosts) honours(host string) bool {
	k.mu.RLock()
	e := k.hosts[host]
	ok := e != nil && e.state == keysHonoured
	k.mu.RUnlock()
	return ok
}

// sending notes that a keyed request goes to host, and reports whether it
// is counted as out (its host's handling is unknown): if so, answered must
// be told once the request's answer or failure is in.
func (k *keyHosts) sending(host string) bool {
	k.mu.RLock()
	e := k.hosts[host]
	known := e != nil && e.state != keysUnknown
	k.mu.RUnlock()
	if known {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e = k.hosts[host]
	switch {
	case e == nil:
		e = &keyHost{}
		k.add(host, e)
	case e.state != keysUnknown:
		return false
	}
	e.out++
	return true
}

// answered records what a keyed request to host showed of its handling of
// keys (keysUnknown: nothing, as a failure without an answer) and, when the
// request was counted by sending, that it is out no more. A host that has
// shown it honours keys is not taken back by an answer without the echo.
func (k *keyHosts) answered(host string, counted bool, shown keyState) {
	if !counted {
		// From a host whose state was known when the request went: most
		// often, it shows the same again.
		k.mu.RLock()
		e := k.hosts[host]
		same := shown == keysUnknown || e != nil && (e.state == shown || e.state == keysHonoured)
		k.mu.RUnlock()
		if same {
			return
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.hosts[host]
	if e == nil {
		if shown == keysUnknown {
			return
		}
		e = &keyHost{}
		k.add(host, e)
	}
	if counted && e.out > 0 {
		e.out--
	}
	if shown == keysHonoured || shown == keysIgnored && e.state == keysUnknown {
		e.state = shown
	}
	if e.state != keysUnknown || e.out == 0 {
		if e.settled != nil {
			close(e.settled)
			e.settled = nil
		}
		if e.state == keysUnknown {
			delete(k.hosts, host) // nothing known, nothing out
		}
	}
}

// await returns what host has shown of its handling of keys and, while it
// is unknown and keyed requests to it are out, a channel closed when that
// changes: when the state settles, or when none is out any more. The
// channel is nil when there is nothing to wait for.
func (k *keyHosts) await(host string) (keyState, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.hosts[host]
	switch {
	case e == nil:
		return keysUnknown, nil
	case e.state != keysUnknown || e.out == 0:
		return e.state, nil
	}
	if e.settled == nil {
		e.settled = make(chan struct{})
	}
	return keysUnknown, e.settled
}

// add puts e in the map; past maxKeyHosts it forgets a host whose state is
// known and that no request is out to (any one: a host forgotten shows it
// again). Hosts with requests out are never forgotten, so they are bounded
// by the requests in flight. k.mu is held.
func (k *keyHosts) add(host string, e *keyHost) {
	if k.hosts == nil {
		k.hosts = make(map[string]*keyHost)
	}
	if len(k.hosts) >= maxKeyHosts {
		for h, old := range k.hosts {
			if old.out == 0 && old.settled == nil {
				delete(k.hosts, h)
				break
			}
		}
	}
	k.hosts[host] = e
}

// honouredHosts is what WithKeysHonoured said: every host, or these.
type honouredHosts struct {
	all   bool
	hosts []string
}

// covers reports whether u's host is one the user said honours keys: its
// host as in the URL, or its name without the port.
func (h honouredHosts) covers(u *url.URL) bool {
	if h.all {
		return true
	}
	if len(h.hosts) == 0 {
		return false
	}
	name := u.Hostname()
	for _, s := range h.hosts {
		if strings.EqualFold(s, u.Host) || strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

// WithKeysHonoured says that servers deduplicate the idempotency keys the
// Transport sends: those of hosts (a host as in the URL, "api.example.com"
// or "api.example.com:8443"; a name without a port covers every port), or
// of every host when none is given. Calls add up.
//
// A POST or PATCH that may have reached its server (a connection reset
// after it was written, a timeout, a 502, 503 or 504) is safe to send
// again only if the server recognises its key and does not act twice; most
// servers ignore the header, and a resend is then a second effect. So
// until a host has shown that it honours keys, its keyed POSTs and PATCHes
// are retried as if they had no key: only when they provably never reached
// it. A host shows it with any answer to a keyed request that echoes the
// key in the key header (our idempotency middleware does on every keyed
// answer; Stripe does) or says Idempotent-Replayed: true; the Transport
// remembers it from then on. Meanwhile, such a request that may have
// reached the host waits, up to its deadline (or MaxWait without one), for
// the answers of the other keyed requests out to it to show whether it
// honours keys, and is retried if one does. WithKeysHonoured is for servers
// known to deduplicate that never say so, or for a first request to one
// that does, alone before its first answer.
func WithKeysHonoured(hosts ...string) Option {
	hosts = append([]string(nil), hosts...)
	return optionFunc(func(c *config) {
		h := &c.http.honoured
		if len(hosts) == 0 {
			h.all = true
			return
		}
		h.hosts = append(h.hosts[:len(h.hosts):len(h.hosts)], hosts...)
	})
}

// keysHonoured reports whether the request's host is known to deduplicate
// its key: the user said so, or the host showed it (now, or since the
// request began).
func (rt *roundTrip) keysHonoured() bool {
	if !rt.honoured && rt.t != nil && rt.t.keyHosts.honours(rt.orig.URL.Host) {
		rt.honoured = true
	}
	return rt.honoured
}

// replayable reports whether the request may be sent again after it may
// have reached the server: its method is idempotent, or it carries a key
// its host is known to honour.
func (rt *roundTrip) replayable() bool {
	return rt.idempotent || rt.keyed && rt.keysHonoured()
}

// guarded reports whether the request carries a key that its host has not
// shown it honours, so that nothing may send it again once it may have
// reached the server.
func (rt *roundTrip) guarded() bool {
	return rt.keyed && !rt.idempotent && !rt.keysHonoured()
}

// keySending counts the request as out to its host, when it is guarded
// and its host's handling of keys is unknown: its answer may show it.
func (rt *roundTrip) keySending() {
	if rt.t != nil && !rt.keyOut && rt.guarded() {
		rt.keyOut = rt.t.keyHosts.sending(rt.orig.URL.Host)
	}
}

// keyAnswered tells the Transport what an attempt of a guarded request
// showed of its host's handling of keys (h is the response's header; nil
// for a failure without an answer), and that the attempt is out no more.
// A response to a guarded request shows that the host honours keys when it
// echoes the key the request carried, or says it replays an earlier
// outcome; that it ignores them when it does neither and is the server's
// own answer (see ignoresKeys).
func (rt *roundTrip) keyAnswered(status int, h http.Header) {
	if rt.t == nil || !rt.keyOut && !rt.guarded() {
		return
	}
	shown := keysUnknown
	switch {
	case h == nil:
	case len(h[replayedHeader]) > 0 && strings.EqualFold(strings.TrimSpace(h[replayedHeader][0]), "true"),
		sameKey(firstValue(h, rt.c.http.keyHeader), rt.reportedKey()):
		shown = keysHonoured
		rt.honoured = true
	case ignoresKeys(status):
		shown = keysIgnored
	}
	counted := rt.keyOut
	rt.keyOut = false
	rt.t.keyHosts.answered(rt.orig.URL.Host, counted, shown)
}

// ignoresKeys reports whether an answer with status to a keyed request,
// without the key's echo, shows that its host ignores keys: an answer of
// the server's own, a success or a failure. A 408, 429, 502, 503 or 504
// does not: it is as often the answer of something in front of the server
// (a proxy, a gateway, a rate limiter) that never passed the request on.
func ignoresKeys(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return false
	}
	return status >= 200 && status < 300 || status >= 400 && status < 600
}

// awaitKeys waits, once an attempt of a guarded request failed in a way
// that a retry could get past (o.unproven: a reset after the request was
// written, a timeout, a 502, 503 or 504) but that may have reached the
// server, for the other keyed requests out to the same host to show whether
// it honours keys. It reports whether it does, with o judged again as the
// failure of a request its host is known to honour (retried as usual). It
// gives up at once when the host has shown it ignores keys or no other
// keyed request is out to it to show anything, and when what is out ends
// without showing it; the wait lasts at most until the request's deadline,
// or the ride-through's MaxWait without one.
func (rt *roundTrip) awaitKeys(o outcome) (outcome, bool) {
	if rt.t == nil {
		return o, false
	}
	var timer *clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var timeout <-chan time.Time // without a deadline: MaxWait
	for {
		state, settled := rt.t.keyHosts.await(rt.orig.URL.Host)
		if state == keysHonoured {
			break
		}
		if settled == nil {
			return o, false
		}
		if timer == nil && rt.deadline.IsZero() {
			timer = rt.c.clock.Timer(rt.c.ride.maxWait)
			timeout = timer.C
		}
		select {
		case <-settled:
		case <-rt.ctx.Done():
			return o, false
		case <-timeout:
			return o, false
		}
	}
	rt.honoured = true
	again := outcome{err: o.err, status: o.status, hedges: o.hedges}
	if o.err != nil {
		rt.classifyError(o.err, &again)
	} else {
		rt.classifyResponse(rt.resp, &again)
	}
	return again, true
}

// sameKey reports whether an echoed key is the one sent, either of them
// with or without the Structured Field string's quotes.
func sameKey(echoed, sent string) bool {
	echoed, sent = unquoteKey(echoed), unquoteKey(sent)
	return echoed != "" && echoed == sent
}

func unquoteKey(v string) string {
	v = strings.Trim(v, " \t")
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	return v
}

// sentOnce is the body of a guarded request that has none: net/http's
// Transport resends by itself, on a reused connection that died before the
// response, a request that has an Idempotency-Key or X-Idempotency-Key
// header unless it has a body it cannot rewind. A Body that is neither nil
// nor http.NoBody, with no GetBody, is one (net/http reads it as empty and
// sends Content-Length: 0).
type sentOnce struct{}

func (sentOnce) Read([]byte) (int, error) { return 0, io.EOF }
func (sentOnce) Close() error             { return nil }
