package pgstore_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	gateBeforeComplete = "before-complete"
)

// childMain runs the server mode and returns the process's exit code.
func childMain(mode string) int {
	if mode != "server" {
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
	if err := runChildServer(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childServer is an order service: each POST /orders charges a payment
// provider (the fake dependency), writes the order row and an outbox message
// in the completion transaction, and stores the response.
type childServer struct {
	store  *pgstore.Store
	schema string
	dep    string
	gate   string
	stdin  *bufio.Reader
	outMu  sync.Mutex
}

func (c *childServer) say(format string, args ...any) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	fmt.Printf(format+"\n", args...)
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
	c.say("listening http://%s", ln.Addr())
	return http.Serve(ln, http.HandlerFunc(c.serveOrder))
}

// wait blocks until the parent sends a line: the process is "paused" here.
func (c *childServer) wait(gate string, attempt int64) {
	if c.gate != gate {
		return
	}
	c.say("%s %d", gate, attempt)
	_, _ = c.stdin.ReadString('\n')
}

func (c *childServer) serveOrder(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := r.Header.Get("Idempotency-Key")
	body, _ := io.ReadAll(r.Body)
	sum := sha256.Sum256(body)
	claim, err := c.store.Claim(ctx, idempotency.ClaimRequest{Caller: "alice", Key: key,
		Fingerprint: hex.EncodeToString(sum[:]), Lease: time.Hour, TTL: 24 * time.Hour})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rec := claim.Record
	switch claim.Outcome {
	case idempotency.ClaimCompleted:
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(rec.Response)
		return
	case idempotency.ClaimInProgress:
		http.Error(w, "in progress", http.StatusConflict)
		return
	case idempotency.ClaimMismatch:
		http.Error(w, "mismatch", http.StatusUnprocessableEntity)
		return
	}
	f := idempotency.Fence{Caller: rec.Caller, Key: rec.Key, Attempt: rec.Attempt}
	resp, err := c.execute(ctx, f, rec)
	if errors.Is(err, idempotency.ErrLeaseLost) {
		c.say("lease lost %d", f.Attempt)
		http.Error(w, "lease lost", http.StatusConflict)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	c.say("completed %d", f.Attempt)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(resp)
}

// execute runs the order, resuming from the record's recovery point.
func (c *childServer) execute(ctx context.Context, f idempotency.Fence, rec idempotency.Record) ([]byte, error) {
	charge := rec.RecoveryData
	if rec.RecoveryPoint != "done:charge" {
		// Recovery point before the external call, committed on its own.
		if err := c.store.SaveRecoveryPoint(ctx, f, "begin:charge", nil, time.Hour); err != nil {
			return nil, err
		}
		var err error
		charge, err = c.charge(ctx, downstreamKey(f.Caller, f.Key, "charge"))
		if err != nil {
			return nil, err
		}
		c.say("called %d", f.Attempt)
		c.wait(gateAfterCall, f.Attempt)
		// Recovery point after it, with its result.
		if err := c.store.SaveRecoveryPoint(ctx, f, "done:charge", charge, time.Hour); err != nil {
			return nil, err
		}
	}
	tx, err := c.store.Begin(ctx, f)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	txCtx := tx.Context(ctx)
	ptx, _ := pgstore.TxFrom(txCtx)
	order := fmt.Sprintf("%s#%d", f.Key, f.Attempt)
	if _, err := ptx.Exec(txCtx, "INSERT INTO "+table(c.schema, "local_writes")+" (name) VALUES ($1)", order); err != nil {
		return nil, err
	}
	if _, err := c.store.Enqueue(txCtx, ptx, "order.created", []byte(order)); err != nil {
		return nil, err
	}
	c.wait(gateBeforeComplete, f.Attempt)
	resp := fmt.Appendf(nil, "order %s charge %s", order, charge)
	return resp, tx.Complete(ctx, resp)
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

// downstreamKey derives a step's key for the dependency from (caller, key,
// step), the same on every attempt.
func downstreamKey(caller, key, step string) string {
	h := sha256.New()
	for _, s := range []string{caller, key, step} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}
