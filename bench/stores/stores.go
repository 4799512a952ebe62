// Package stores measures what each idempotency store costs a service:
// keyed requests per second through the idempotency Middleware (first
// executions and replays) and the store's round trips per request, beside
// the database's own limit for the store's statements, measured in the same
// run at the same concurrency.
package stores

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// Settings size a run.
type Settings struct {
	// Clients is how many requests (or limit loops) run at once.
	Clients int
	// Phase is how long one measurement runs; Rounds how many times the
	// Middleware's first executions and the limit are measured, in turn,
	// so that load from elsewhere on the machine weighs on both alike.
	Phase  time.Duration
	Rounds int
	// Replays is how many completed keys the replay phase repeats.
	Replays int
	// Counted is how many first executions, then replays, are sent one
	// after another on the warm pool to count the store's round trips per
	// request.
	Counted int
}

// DefaultSettings are the sizes of the published results.
func DefaultSettings() Settings {
	return Settings{Clients: 16, Phase: 2 * time.Second, Rounds: 3, Replays: 64, Counted: 256}
}

// QuickSettings are small sizes for a smoke run.
func QuickSettings() Settings {
	return Settings{Clients: 4, Phase: 150 * time.Millisecond, Rounds: 1, Replays: 8, Counted: 32}
}

// Backend is one store under measurement.
type Backend struct {
	// Name names the store in the results.
	Name string
	// Open makes a fresh, empty store for clients at once.
	Open func(ctx context.Context, clients int) (Opened, error)
	// How names the way Opened.Limit measures ("" without a limit).
	How string
}

// Opened is a store a Backend made.
type Opened struct {
	Store idempotency.Store
	// RT counts the round trips of the store's connections (nil for a
	// store in memory).
	RT *RoundTrips
	// Close removes the store.
	Close func()
	// Limit measures, for d, how many claim+complete pairs per second the
	// database serves with the store's own statements alone at clients at
	// once; nil when there is no database.
	Limit func(ctx context.Context, clients int, d time.Duration) (float64, error)
}

// Result is what a run measured of one backend.
type Result struct {
	Backend string
	// FirstPerSec and ReplayPerSec are keyed requests per second through the
	// Middleware over loopback HTTP.
	FirstPerSec, ReplayPerSec float64
	// FirstTrips and ReplayTrips are the store's round trips per request,
	// counted over requests sent one after another on warm connections:
	// the store's own, whatever the pool does under load (new connections,
	// their handshakes and statement preparation, pings of idle ones).
	FirstTrips, ReplayTrips float64
	// LimitPerSec is the store's claim+complete pairs per second alone (0:
	// none); LimitHow says how it was measured.
	LimitPerSec float64
	LimitHow    string
	// FirstBusy and LimitBusy are the share of the machine's CPU that was
	// busy while first executions, and the limit, were measured (-1: not
	// known). Well below 1, the phase waited on something other than CPU.
	FirstBusy, LimitBusy float64
	// Err says why the backend could not be measured.
	Err error
}

// Ratio is the first executions through the Middleware over the limit.
func (r Result) Ratio() float64 {
	if r.LimitPerSec == 0 {
		return 0
	}
	return r.FirstPerSec / r.LimitPerSec
}

// Run measures every backend, one after another, and logs progress to log.
func Run(ctx context.Context, s Settings, backends []Backend, log io.Writer) []Result {
	var out []Result
	for _, b := range backends {
		start := time.Now()
		r := measure(ctx, s, b)
		fmt.Fprintf(log, "%-12s %v\n", b.Name, time.Since(start).Round(time.Millisecond))
		out = append(out, r)
	}
	return out
}

// measure measures one backend.
func measure(ctx context.Context, s Settings, b Backend) Result {
	res := Result{Backend: b.Name, LimitHow: b.How}
	o, err := b.Open(ctx, s.Clients)
	if err != nil {
		res.Err = err
		return res
	}
	defer o.Close()
	store, rt := o.Store, o.RT
	srv := httptest.NewServer(idempotency.Middleware(idempotency.NewRunner(store), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			idempotency.MarkStarted(r.Context())
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "created")
		})))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 4 * s.Clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var seq atomic.Int64
	firstExecution := func() error {
		return post(client, srv.URL, "first-"+strconv.FormatInt(seq.Add(1), 10))
	}
	if err := firstExecution(); err != nil { // warm: connections, prepared statements, scripts
		res.Err = err
		return res
	}
	for i := range s.Replays {
		if err := post(client, srv.URL, "replay-"+strconv.Itoa(i)); err != nil {
			res.Err = err
			return res
		}
	}
	replay := func(i int64) error {
		return post(client, srv.URL, "replay-"+strconv.FormatInt(i%int64(s.Replays), 10))
	}
	var (
		first, replays       phase
		limitN               float64
		limitTime            time.Duration
		firstBusy, limitBusy busyMeter
	)
	for range s.Rounds {
		firstBusy.begin()
		err := first.run(ctx, s, func(int64) error { return firstExecution() })
		firstBusy.end()
		if err != nil {
			res.Err = err
			return res
		}
		if err := replays.run(ctx, s, replay); err != nil {
			res.Err = err
			return res
		}
		if o.Limit != nil {
			limitBusy.begin()
			perSec, err := o.Limit(ctx, s.Clients, s.Phase)
			limitBusy.end()
			if err != nil {
				res.Err = fmt.Errorf("limit: %w", err)
				return res
			}
			limitN += perSec * s.Phase.Seconds()
			limitTime += s.Phase
		}
	}
	res.FirstPerSec, res.ReplayPerSec = first.perSec(), replays.perSec()
	res.FirstBusy, res.LimitBusy = firstBusy.share(), limitBusy.share()
	if res.FirstTrips, err = tripsPer(rt, s.Counted, func(int64) error { return firstExecution() }); err != nil {
		res.Err = err
		return res
	}
	if res.ReplayTrips, err = tripsPer(rt, s.Counted, replay); err != nil {
		res.Err = err
		return res
	}
	if limitTime > 0 {
		res.LimitPerSec = limitN / limitTime.Seconds()
	}
	return res
}

// phase adds up the rounds of one measurement.
type phase struct {
	n    int64
	took time.Duration
}

// run runs f from s.Clients goroutines for s.Phase and adds what it did.
func (p *phase) run(ctx context.Context, s Settings, f func(int64) error) error {
	n, d, err := load(ctx, s.Clients, s.Phase, f)
	p.n, p.took = p.n+n, p.took+d
	return err
}

func (p *phase) perSec() float64 { return float64(p.n) / p.took.Seconds() }

// tripsPer calls f n times, one call after another, and returns the
// store's round trips per call. After the load phases every connection of
// the pool is warm, and one caller at a time never makes the pool open
// another: the count is the store's own, on an idle machine or a busy one.
func tripsPer(rt *RoundTrips, n int, f func(int64) error) (float64, error) {
	before := rt.count()
	for i := range n {
		if err := f(int64(i)); err != nil {
			return 0, err
		}
	}
	return float64(rt.count()-before) / float64(max(n, 1)), nil
}

// load runs f from clients goroutines for d and returns how many calls
// completed, and the time they took.
func load(ctx context.Context, clients int, d time.Duration, f func(i int64) error) (int64, time.Duration, error) {
	var (
		wg    sync.WaitGroup
		n     atomic.Int64
		errMu sync.Mutex
		first error
	)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := f(n.Load()); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					cancel()
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load(), time.Since(start), first
}

// post sends one keyed request and wants 201.
func post(client *http.Client, url, key string) error {
	req, err := http.NewRequest(http.MethodPost, url+"/charges", strings.NewReader(`{"amount":100}`))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: status %d", key, res.StatusCode)
	}
	return nil
}

// RoundTrips counts client-server round trips on a store's connections: a
// round trip starts with the first write after a read (or the first write
// ever). Pipelined commands sent in one write count once. A nil
// *RoundTrips counts nothing.
type RoundTrips struct{ n atomic.Int64 }

func (r *RoundTrips) count() int64 {
	if r == nil {
		return 0
	}
	return r.n.Load()
}

// Conn wraps c to count its round trips.
func (r *RoundTrips) Conn(c net.Conn) net.Conn { return &countingConn{Conn: c, rt: r} }

type countingConn struct {
	net.Conn
	rt      *RoundTrips
	writing atomic.Bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	if !c.writing.Swap(true) {
		c.rt.n.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.writing.Store(false)
	}
	return n, err
}

// directLimit measures s's Claim and Complete called directly, at clients
// at once, for d: the store's own statements or scripts, without HTTP or
// the Middleware.
func directLimit(s idempotency.Store) func(ctx context.Context, clients int, d time.Duration) (float64, error) {
	return func(ctx context.Context, clients int, d time.Duration) (float64, error) {
		return callLimit(ctx, s, clients, d)
	}
}

func callLimit(ctx context.Context, s idempotency.Store, clients int, d time.Duration) (float64, error) {
	var seq atomic.Int64
	prefix := "limit-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	n, took, err := load(ctx, clients, d, func(int64) error {
		c, err := s.Claim(ctx, idempotency.ClaimRequest{Caller: "", Key: prefix + strconv.FormatInt(seq.Add(1), 10),
			Fingerprint: limitFingerprint, Lease: defaultLease, TTL: defaultTTL})
		if err != nil {
			return err
		}
		if c.Outcome != idempotency.ClaimCreated {
			return fmt.Errorf("claim: outcome %d", c.Outcome)
		}
		return s.Complete(ctx, c.Record.Fence(), limitResponse)
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / took.Seconds(), nil
}

// The fingerprint and stored response of a request like the Middleware's.
var (
	limitFingerprint = idempotency.Fingerprint(http.MethodPost, "/charges", "", []byte(`{"amount":100}`))
	limitResponse    = []byte("HTTP/1.1 201 Created\r\nContent-Type: text/plain; charset=utf-8\r\n\r\ncreated")
)

// The Runner's defaults (idempotency.WithLease, idempotency.WithTTL), with
// which the benchmarks claim as a Runner would.
const (
	defaultLease = time.Minute
	defaultTTL   = 24 * time.Hour
)
