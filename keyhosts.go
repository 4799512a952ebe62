package retry

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// replayedHeader is the response header with which a server that
// deduplicates keys says it replays the outcome of an earlier request with
// the same key (our idempotency middleware, Stripe).
const replayedHeader = "Idempotent-Replayed"

// maxKeyHosts bounds the hosts a Transport remembers as honouring keys;
// past it, one it knows is forgotten for each new one (it shows it again
// with its next keyed answer).
const maxKeyHosts = 4096

// keyHosts are the hosts that have shown they honour idempotency keys.
// Safe for concurrent use; the zero value knows none.
type keyHosts struct {
	mu    sync.RWMutex
	hosts map[string]struct{}
}

// honours reports whether host has shown it honours keys.
func (k *keyHosts) honours(host string) bool {
	k.mu.RLock()
	_, ok := k.hosts[host]
	k.mu.RUnlock()
	return ok
}

// learn remembers that host honours keys.
func (k *keyHosts) learn(host string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.hosts[host]; ok {
		return
	}
	if k.hosts == nil {
		k.hosts = make(map[string]struct{})
	}
	if len(k.hosts) >= maxKeyHosts {
		for h := range k.hosts { // any one: a host forgotten shows it again
			delete(k.hosts, h)
			break
		}
	}
	k.hosts[host] = struct{}{}
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
// remembers it from then on. WithKeysHonoured is for servers known to
// deduplicate that never say so, or for the very first requests to one
// that does, before its first answer.
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

// noteKeyEvidence learns from a response to a guarded request whether its
// host honours keys: it echoes the key the request carried, or says it
// replays an earlier outcome.
func (rt *roundTrip) noteKeyEvidence(h http.Header) {
	if rt.t == nil || !rt.guarded() {
		return
	}
	if v := h[replayedHeader]; len(v) > 0 && strings.EqualFold(strings.TrimSpace(v[0]), "true") ||
		sameKey(firstValue(h, rt.c.http.keyHeader), rt.reportedKey()) {
		rt.honoured = true
		rt.t.keyHosts.learn(rt.orig.URL.Host)
	}
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
