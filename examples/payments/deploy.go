package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry/examples/internal/opspage"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/opsui"
)

// Settings of -crash.
const (
	// crashLease is the Runner's lease with -crash: how long the executions
	// a killed instance left stay claimed before they may be taken over.
	crashLease = time.Second
	// reconcileInterval is the time between two passes of the restarted
	// instance's Reconciler.
	reconcileInterval = 200 * time.Millisecond
	// settleIntervals bounds the wait, at the end of a run, for the keys
	// still in progress: the lease and this many reconcile intervals.
	settleIntervals = 10
	// relistenFor bounds the time a restarted instance tries to listen on
	// the killed instance's address.
	relistenFor = 5 * time.Second
)

// resumeName is the name of the charges handler for the Reconciler
// (idempotency.WithResume).
const resumeName = "charges"

// crashPlan says when to kill the service: once a charge passes after at
// least at charges were requested.
type crashPlan struct {
	at        int64
	requested *atomic.Int64
}

// deployment is the payment service for one client's run: instances
// serving one loopback address, one at a time, on one store, charging one
// ledger (the payment provider, which outlives them). Without a crash plan
// one instance serves the whole run. With one, the first handler to pass
// its charge once the plan's share of the charges was requested kills its
// instance, as if its process died, and starts another on the same address
// and store, which runs a Reconciler (see kill).
type deployment struct {
	name      string
	ledger    *ledger
	openStore storeOpener
	tel       *telemetry
	crash     *crashPlan // nil: no crash
	lease     time.Duration
	progress  io.Writer
	logger    *slog.Logger
	addr      string // where every instance listens

	// page, if not nil, shows the Runner of the latest instance and
	// pageClients (guarded by mu, as runner is).
	page        *opspage.Page
	pageClients []opsui.Client
	runner      *idempotency.Runner

	// release ends the wait of the killed instance's handlers.
	release     chan struct{}
	releaseOnce sync.Once
	// handlers counts the handlers running, on every instance.
	handlers sync.WaitGroup

	crashed    atomic.Bool  // the instance was killed (or is being)
	frozen     atomic.Int64 // handlers of the killed instance stopped (see alive)
	reconciled atomic.Int64 // executions a Reconciler finished
	takenOver  atomic.Int64 // executions a client's retry took over and finished

	mu        sync.Mutex
	instances []*instance
	killedAt  int
	err       error // why the restart failed
	// seen are the (caller, key) of the keyed requests the service got,
	// kept with a crash plan only.
	seen map[[2]string]struct{}
}

// instance is one process of the service: its own server and Runner.
type instance struct {
	srv    *http.Server
	served chan struct{} // closed when Serve returned
	store  idempotency.Store
	rc     *idempotency.Reconciler // nil on the first instance
	dead   atomic.Bool
}

// startDeployment starts the first instance on a new loopback address.
// crash, if not nil, plans the kill; stderr gets a line when it happens
// and the restarted instance's Reconciler's warnings.
func startDeployment(ctx context.Context, name string, l *ledger, open storeOpener, tel *telemetry,
	crash *crashPlan, stderr io.Writer) (*deployment, error) {
	d := &deployment{
		name: name, ledger: l, openStore: open, tel: tel, crash: crash, progress: stderr,
		release: make(chan struct{}),
		logger:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if crash != nil {
		d.lease = crashLease
		d.seen = make(map[[2]string]struct{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.addr = ln.Addr().String()
	if _, err := d.start(ctx, ln, false); err != nil {
		ln.Close()
		return nil, err
	}
	return d, nil
}

// url returns the service's base URL.
func (d *deployment) url() string { return "http://" + d.addr }

// start starts an instance serving ln, with a Reconciler if reconcile.
func (d *deployment) start(ctx context.Context, ln net.Listener, reconcile bool) (*instance, error) {
	store, err := d.openStore(ctx)
	if err != nil {
		return nil, err
	}
	inst := &instance{served: make(chan struct{}), store: store}
	opts := []idempotency.Option{idempotency.WithObserver(d.observer())}
	if d.lease > 0 {
		opts = append(opts, idempotency.WithLease(d.lease))
	}
	runner := idempotency.NewRunner(store, opts...)
	mw := idempotency.Middleware(runner, callerOf, idempotency.WithRequiredMethods(),
		idempotency.WithResume(resumeName, "Content-Type"))
	mux := http.NewServeMux()
	mux.Handle("POST /charges", d.chargeHandler(inst))
	inst.srv = &http.Server{Handler: d.track(d.tel.handler(mw(mux))), ReadHeaderTimeout: 5 * time.Second, ErrorLog: quietLog()}
	go func() {
		defer close(inst.served)
		if err := inst.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	if reconcile {
		inst.rc = idempotency.StartReconciler(runner, idempotency.ReconcilerConfig{Interval: reconcileInterval, Logger: d.logger})
	}
	d.mu.Lock()
	d.instances = append(d.instances, inst)
	d.runner = runner
	page, clients := d.page, d.pageClients
	d.mu.Unlock()
	page.Show(opsui.Config{Runner: runner, Clients: clients})
	return inst, nil
}

// show makes page show the deployment's latest Runner and clients, and
// every Runner a restart makes from now on.
func (d *deployment) show(page *opspage.Page, clients []opsui.Client) {
	d.mu.Lock()
	d.page, d.pageClients = page, clients
	runner := d.runner
	d.mu.Unlock()
	page.Show(opsui.Config{Runner: runner, Clients: clients})
}

// observer counts the executions finished after a takeover, by a
// Reconciler or by a client's retry, and passes every observation on to
// the telemetry.
func (d *deployment) observer() func(context.Context, idempotency.Observation) {
	next := d.tel.observer()
	return func(ctx context.Context, o idempotency.Observation) {
		if o.Err == nil {
			switch o.Outcome {
			case idempotency.OutcomeReconciled:
				d.reconciled.Add(1)
			case idempotency.OutcomeTakenOver:
				d.takenOver.Add(1)
			}
		}
		if next != nil {
			next(ctx, o)
		}
	}
}

// track counts the running handlers and, with a crash plan, notes the key
// of every keyed request.
func (d *deployment) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.handlers.Add(1)
		defer d.handlers.Done()
		if d.seen != nil {
			d.see(r)
		}
		next.ServeHTTP(w, r)
	})
}

// see notes the caller and key of r, if it has a well-formed key.
func (d *deployment) see(r *http.Request) {
	values := r.Header.Values("Idempotency-Key")
	if len(values) != 1 {
		return
	}
	key, err := idempotency.ParseKey(values[0])
	if err != nil {
		return
	}
	caller, err := callerOf(r)
	if err != nil {
		return
	}
	d.mu.Lock()
	d.seen[[2]string{caller, key}] = struct{}{}
	d.mu.Unlock()
}

// charged is where a handler of inst stands once it charged: with a crash
// plan, the first to get there once the plan's share of the charges was
// requested kills inst.
func (d *deployment) charged(inst *instance) {
	if d.crash == nil || d.crash.requested.Load() < d.crash.at || !d.crashed.CompareAndSwap(false, true) {
		return
	}
	d.kill(inst)
}

// alive reports whether inst still runs. A handler of a killed instance
// stops where it stands, as its process would have, until the run ends,
// and then reports false: it completes nothing. (Behind the Middleware,
// its answer is then offered to the store and fenced out, since its
// execution was taken over by then, unless it is stuck.)
func (d *deployment) alive(inst *instance) bool {
	if !inst.dead.Load() {
		return true
	}
	d.frozen.Add(1)
	<-d.release
	return false
}

// kill kills inst: its handlers stop (see alive), and its server closes
// its listener and connections, so that the proxy's connections to it
// break (the proxy answers 502, as a load balancer would). Another
// instance starts at once on the same address and store, with a
// Reconciler.
func (d *deployment) kill(inst *instance) {
	executed, _ := d.ledger.totals()
	inst.dead.Store(true)
	inst.srv.Close()
	<-inst.served
	d.mu.Lock()
	d.killedAt = executed
	d.mu.Unlock()
	fmt.Fprintf(d.progress, "%-20s killed the service at charge %d; restarting it on the same store\n", d.name, executed)
	ctx, cancel := context.WithTimeout(context.Background(), relistenFor)
	defer cancel()
	ln, err := listen(ctx, d.addr)
	if err == nil {
		if _, err = d.start(ctx, ln, true); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		d.mu.Lock()
		d.err = fmt.Errorf("restart the service: %w", err)
		d.mu.Unlock()
	}
}

// listen listens on addr, trying again until ctx ends while the port is
// not yet free.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln, nil
		}
		if !pause(ctx, 10*time.Millisecond) {
			return nil, err
		}
	}
}

// settle waits, with a crash plan, until no keyed request the service got
// is in progress in the store, for at most the lease and settleIntervals
// reconcile intervals, and returns how many still are. Then it stops the
// Reconcilers, so that the counts are final.
func (d *deployment) settle(ctx context.Context) (stuck int, err error) {
	defer d.stopReconcilers()
	if d.crash == nil {
		return 0, nil
	}
	d.mu.Lock()
	keys := make([][2]string, 0, len(d.seen))
	for k := range d.seen {
		keys = append(keys, k)
	}
	store := d.instances[len(d.instances)-1].store
	d.mu.Unlock()
	deadline := time.Now().Add(d.lease + settleIntervals*reconcileInterval)
	for {
		pending := keys[:0]
		for _, k := range keys {
			rec, err := store.Get(ctx, k[0], k[1])
			switch {
			case errors.Is(err, idempotency.ErrNotFound): // released: nothing began
			case err != nil:
				return 0, fmt.Errorf("read the record of key %q: %w", k[1], err)
			case rec.State == idempotency.StateInProgress:
				pending = append(pending, k)
			}
		}
		keys = pending
		if len(keys) == 0 || !time.Now().Before(deadline) {
			return len(keys), nil
		}
		if !pause(ctx, 20*time.Millisecond) {
			return len(keys), ctx.Err()
		}
	}
}

// stopReconcilers stops the instances' Reconcilers.
func (d *deployment) stopReconcilers() {
	d.mu.Lock()
	insts := d.instances
	d.mu.Unlock()
	for _, inst := range insts {
		if inst.rc != nil {
			inst.rc.Stop()
		}
	}
}

// crashReport returns what the crash did; ok is false when there was none.
func (d *deployment) crashReport() (killedAt, inFlight int, ok bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.killedAt, int(d.frozen.Load()), d.crashed.Load(), d.err
}

// stop releases the killed instance's handlers, stops every instance and
// waits for their handlers to return.
func (d *deployment) stop() {
	d.releaseOnce.Do(func() { close(d.release) })
	d.stopReconcilers()
	d.mu.Lock()
	insts := d.instances
	d.mu.Unlock()
	for _, inst := range insts {
		inst.srv.Close()
		<-inst.served
	}
	d.handlers.Wait()
}
