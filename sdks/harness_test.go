// Package sdks_test runs SDKs that retry on their own (stripe-go, the AWS
// SDK for Go v2's S3 and DynamoDB clients, go-github) over the retry
// Transport, against fakes of their APIs that inject faults, and checks that
// the two retry layers do not multiply, that no effect is duplicated and
// that what the SDK set (its keys, its signatures) survives our resends.
package sdks_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry"
)

// fault is what the fake does with an attempt.
type fault string

const (
	pass        fault = ""
	f503        fault = "503"
	f429        fault = "429 Retry-After: 1"
	f409        fault = "409"
	resetBefore fault = "reset before the effect"
	resetAfter  fault = "reset after the effect"
)

// fake is the fault injection and the counters every API fake shares.
type fake struct {
	mu       sync.Mutex
	script   []fault // the fault of each attempt; past its end, always
	always   fault
	honours  bool // replays the outcome of a key it has seen
	attempts int
	effects  int
	done     map[string][]byte // key -> the answer of its effect
	keys     []string          // the key header of every attempt
	check    func(r *http.Request) error
	bad      []error // what check found
}

func newFake(always fault, script ...fault) *fake {
	return &fake{always: always, script: script, done: map[string][]byte{}}
}

// serve answers one attempt: the fault, or effect's answer (once per key
// when the fake honours keys). errBody gives a fault's status its body in
// the API's own form.
func (f *fake) serve(w http.ResponseWriter, r *http.Request, effect func() []byte,
	errBody func(status int) (string, string)) {
	f.mu.Lock()
	n := f.attempts
	f.attempts++
	flt := f.always
	if n < len(f.script) {
		flt = f.script[n]
	}
	key := r.Header.Get("Idempotency-Key")
	f.keys = append(f.keys, key)
	if f.check != nil {
		if err := f.check(r); err != nil {
			f.bad = append(f.bad, err)
		}
	}
	f.mu.Unlock()
	switch flt {
	case resetBefore:
		reset(w)
		return
	case f503, f429, f409:
		status := map[fault]int{f503: 503, f429: 429, f409: 409}[flt]
		if flt == f429 {
			w.Header().Set("Retry-After", "1")
		}
		ctype, body := errBody(status)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		fmt.Fprint(w, body)
		return
	}
	f.mu.Lock()
	body, replay := f.done[key]
	if !(replay && f.honours && key != "") {
		f.effects++
		body = effect()
		if key != "" {
			f.done[key] = body
		}
		replay = false
	}
	f.mu.Unlock()
	if flt == resetAfter {
		reset(w)
		return
	}
	if f.honours && key != "" {
		w.Header().Set("Idempotency-Key", key)
		if replay {
			w.Header().Set("Idempotent-Replayed", "true")
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// reset closes the attempt's connection with a TCP reset.
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// result is what one call cost.
type result struct {
	attempts   int           // requests that reached the fake
	sdk        int           // requests the SDK made (its attempts)
	duplicates int           // effects past the first
	ours       time.Duration // our waits, on the fake clock
	theirs     time.Duration // the SDK's waits, as its backoff gave them
	waits      int           // our waits
	err        error
}

func (r result) time() time.Duration { return r.ours + r.theirs }

func (r result) String() string {
	return fmt.Sprintf("%d attempts (%d by the SDK), %d duplicates, %v", r.attempts, r.sdk, r.duplicates,
		r.time().Round(time.Millisecond))
}

// stack is what sits between the SDK and the fake.
type stack int

const (
	alone      stack = iota // the SDK, its defaults, over net/http
	overOurs                // the SDK, its defaults, over our Transport
	offOverOur              // the SDK with its retries off, over our Transport
)

func (s stack) String() string {
	return [...]string{"SDK alone", "SDK over ours", "SDK retries off over ours"}[s]
}

// layers builds the HTTP client an SDK gets for stack s: it counts the SDK's
// attempts and records the headers the SDK set, over our Transport (on a
// clock whose waits take no time) or net/http.
type layers struct {
	clk  *autoClock
	sdk  int
	mu   sync.Mutex
	sent []http.Header // the headers of each of the SDK's attempts
}

func newLayers(t *testing.T, s stack, opts ...retry.Option) (*layers, *http.Client) {
	l := &layers{clk: newAutoClock()}
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	var rt http.RoundTripper = base
	if s != alone {
		rt = retry.NewTransport(base, append([]retry.Option{retry.WithClock(l.clk)}, opts...)...)
	}
	return l, &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.sdk++
		l.sent = append(l.sent, r.Header.Clone())
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})}
}

func (l *layers) result(f *fake, theirs time.Duration, err error) result {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ours time.Duration
	for _, w := range l.clk.Waits() {
		ours += w
	}
	return result{attempts: f.attempts, sdk: l.sdk, duplicates: max(f.effects-1, 0), ours: ours, theirs: theirs, waits: len(l.clk.Waits()), err: err}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// autoClock is a mock clock whose timers fire at once, moving the clock
// forward by their duration, and which records every wait.
type autoClock struct {
	*clock.Mock
	mu     sync.Mutex
	slept  []time.Duration
	waited time.Duration
}

func newAutoClock() *autoClock {
	m := clock.NewMock()
	m.Set(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	return &autoClock{Mock: m}
}

func (c *autoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Mock.Now().Add(c.waited)
}

func (c *autoClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *autoClock) Timer(d time.Duration) *clock.Timer {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.waited += d
	c.mu.Unlock()
	return clock.New().Timer(0)
}

func (c *autoClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// table collects the rows of the SDK x fault x stack table the tests
// print with -v.
var table = struct {
	sync.Mutex
	rows []string
}{}

func record(t *testing.T, sdk string, f fault, s stack, r result) {
	t.Logf("%s | %s | %s | %s", sdk, f, s, r)
	table.Lock()
	table.rows = append(table.rows, fmt.Sprintf("| %s | %s | %s | %d | %d | %d | %v |", sdk, f, s,
		r.attempts, r.sdk, r.duplicates, r.time().Round(time.Millisecond)))
	table.Unlock()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testing.Verbose() {
		sort.Stable(sort.StringSlice(table.rows))
		fmt.Println("| SDK | fault | stack | attempts | SDK attempts | duplicates | time |")
		fmt.Println("|---|---|---|---|---|---|---|")
		fmt.Println(strings.Join(table.rows, "\n"))
	}
	os.Exit(code)
}
