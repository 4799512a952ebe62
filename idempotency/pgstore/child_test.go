package pgstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The crash tests re-execute the test binary as a server process: TestMain
// sees childModeEnv and runs childMain instead of the tests.
const (
	childModeEnv   = "PGSTORE_TEST_CHILD"
	childSchemaEnv = "PGSTORE_TEST_SCHEMA"
	childShiftEnv  = "PGSTORE_TEST_SHIFT" // time shift of the child's store, a Go duration
	childDepEnv    = "PGSTORE_TEST_DEP"   // URL of the fake external dependency
	childGateEnv   = "PGSTORE_TEST_GATE"  // where the handler stops until a line arrives on stdin
)

// Gates: after the external call (before its recovery point is saved), or
// inside the completion transaction after the local write (before Complete).
const (
	gateAfterCall      = "after-call"
	gateAfterStart     = "after-start"
	gateAfterStep      = "after-step"
	gateBeforeComplete = "before-complete"
)

// childMain runs the server mode and returns the process's exit code.
func childMain(mode string) int {
	run := runChildServer
	switch mode {
	case "server":
	case "relay":
		run = runChildRelay
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childServer is an order service behind the idempotency middleware: each
// POST /orders charges a payment provider (the fake dependency) in a
// recovery step, writes the order row and an outbox message in the
// completion transaction, and the middleware stores the response.
type childServer struct {
	store  *pgstore.Store
	schema string
	dep    string
	gate   string
	stdin  *bufio.Reader
	outMu  sync.Mutex
	out    io.Writer // nil: stdout
}

func (c *childServer) say(format string, args ...any) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	out := c.out
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprintf(out, format+"\n", args...)
}

// handler is the order service as every instance serves it: the order
// handler behind the middleware, which stores each request so that a
// Reconciler can finish it.
func (c *childServer) handler(runner *idempotency.Runner) http.Handler {
	mw := idempotency.Middleware(runner, func(*http.Request) (string, error) { return "alice", nil },
		idempotency.WithResume("orders"))
	return mw(http.HandlerFunc(c.serveOrder))
}

func runChildServer() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		return err
	}
	defer pool.Close()
	shift := new(pgstore.TimeShift)
	if s := os.Getenv(childShiftEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		shift.Advance(d)
	}
	schema := os.Getenv(childSchemaEnv)
	store, err := pgstore.New(pool, pgstore.WithSchema(schema), pgstore.WithTimeShift(shift))
	if err != nil {
		return err
	}
	c := &childServer{store: store, schema: schema, dep: os.Getenv(childDepEnv),
		gate: os.Getenv(childGateEnv), stdin: bufio.NewReader(os.Stdin)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	runner := idempotency.NewRunner(store, idempotency.WithLease(time.Hour))
	orders := c.handler(runner)
	c.say("listening http://%s", ln.Addr())
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		orders.ServeHTTP(rec, r)
		c.say("served %d", rec.status)
	}))
}

// runChildRelay runs one relay batch, delivering each message by POSTing it
// to the sink at childDepEnv with its id as the Idempotency-Key.
func runChildRelay() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.WithSchema(os.Getenv(childSchemaEnv)))
	if err != nil {
		return err
	}
	fmt.Println("listening relay")
	r := &pgstore.Relay{Store: store, Batch: 1000, Deliver: func(ctx context.Context, m pgstore.OutboxMessage) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv(childDepEnv), strings.NewReader(string(m.Payload)))
		if err != nil {
			return err
		}
		req.Header.Set("Idempotency-Key", m.ID)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		return res.Body.Close()
	}}
	_, err = r.RunOnce(ctx)
	return err
}

// wait blocks until the parent sends a line: the process is "paused" here.
func (c *childServer) wait(gate string, attempt int64) {
	if c.gate != gate {
		return
	}
	c.say("%s %d", gate, attempt)
	_, _ = c.stdin.ReadString('\n')
}

// serveOrder is the order handler behind the idempotency middleware.
func (c *childServer) serveOrder(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	e := idempotency.FromContext(ctx)
	idempotency.MarkStarted(ctx) // saved with the record: a reconciler knows it began
	c.wait(gateAfterStart, e.Attempt())
	charge, err := e.Step(ctx, "charge", func(ctx context.Context, key string) ([]byte, error) {
		ch, err := c.charge(ctx, key)
		if err == nil {
			c.say("called %d", e.Attempt())
			c.wait(gateAfterCall, e.Attempt())
		}
		return ch, err
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c.wait(gateAfterStep, e.Attempt())
	tx, _ := pgstore.TxFrom(ctx)
	order := fmt.Sprintf("%s#%d", e.Key(), e.Attempt())
	if _, err := tx.Exec(ctx, "INSERT INTO "+table(c.schema, "local_writes")+" (name) VALUES ($1)", order); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := c.store.Enqueue(ctx, tx, "order.created", []byte(order)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	c.wait(gateBeforeComplete, e.Attempt())
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "order %s charge %s", order, charge)
}

// statusRecorder remembers the status the middleware sent.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// charge calls the payment provider with the step's downstream key.
func (c *childServer) charge(ctx context.Context, key string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.dep, strings.NewReader("amount=100"))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("charge: %s", res.Status)
	}
	return b, err
}
