// Command driver serves the upgrade test's scenarios with one version of the
// idempotency packages: the test builds it from this checkout and, with the
// same main.go and the one store's file copied into an older tree, from
// that version, and runs both against one database. Its source uses only
// the API every tested version has, so it compiles against each of them;
// the few calls whose names changed go through compat_new.go (this
// checkout) or compat_old.go and <store>_old.go (tag upgradeold: the old
// version's names).
//
// Keys are named <generation>.<state>.<path>.<n>: path h is served through
// the Middleware (with WithResume), path w through Runner.Do with the
// registered work "job". The states a seed leaves:
//
//	c  completed
//	l  in progress, live lease (its process died holding a 10-minute lease), step a done
//	x  in progress, lease run out (its process died holding a 1 s lease), step a done: stalled
//	u  in progress, lease run out before anything began (no recovery point)
//	s  stalled: the work failed after step a (lease ended, recovery point kept)
//	p  parked after step a
//	m  claimed with the started mark (Request.StartedAtClaim; a newer version only), failed before step a
//	r  the rolling deploy's keys
//
// Every execution runs step a (a downstream call, counted in the ledger),
// then the local effect (a ledger row in the execution's transaction on the
// SQL stores, with an outbox message on PostgreSQL; on Redis, which has no
// transaction, a step whose downstream keeps the first body per downstream
// key), and answers with the effect's body.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// backend is one store and the ledger kept next to it.
type backend interface {
	// Store is the idempotency store.
	Store() idempotency.Store
	// Migrate runs the store's own migration and creates the ledger.
	Migrate(ctx context.Context) error
	// Schema describes the store's tables, to compare before and after a
	// migration ("" for a store without tables).
	Schema(ctx context.Context) (string, error)
	// Call counts a call of step's downstream for key.
	Call(ctx context.Context, key, step, downstreamKey string) error
	// Effect makes the execution's local effect with body and returns the
	// body it stored.
	Effect(ctx context.Context, key, body string) (string, error)
	// Relay delivers the pending outbox messages (0 without an outbox).
	Relay(ctx context.Context) (int, error)
	// Ledger reads what the executions left.
	Ledger(ctx context.Context) (Ledger, error)
	// Drop removes everything of the run.
	Drop(ctx context.Context) error
	// Close closes the connections.
	Close()
}

// opener opens a store's backend: the store's file registers one. With
// migrate it runs Migrate first; with store it opens the store (with
// neither, only Schema, Ledger and Drop may be called).
type opener func(ctx context.Context, dsn, ns string, migrate, store bool) (backend, error)

// openers are the stores this build knows, by name.
var openers = map[string]opener{}

// Ledger is what the executions of a run left, by key.
type Ledger struct {
	// Effects are the local effects, by key: a body per effect.
	Effects map[string][]string `json:"effects"`
	// Calls counts the downstream calls, by key, then step.
	Calls map[string]map[string]int `json:"calls"`
	// Outbox is the outbox's state (PostgreSQL).
	Outbox *OutboxLedger `json:"outbox,omitempty"`
}

// OutboxLedger is what the outbox holds and what its relays delivered.
type OutboxLedger struct {
	// Messages are the outbox's rows, by payload (the key).
	Messages map[string]int `json:"messages"`
	// Undelivered counts the rows not marked delivered.
	Undelivered int `json:"undelivered"`
	// Deliveries counts deliveries by payload.
	Deliveries map[string]int `json:"deliveries"`
}

// KeyReport is what serving one key gave.
type KeyReport struct {
	Key string `json:"key"`
	// Outcome: executed, replayed, in_progress, or error.
	Outcome string `json:"outcome"`
	// Response is the response: for path h its status, the handler's
	// headers and its body; for path w the work's response.
	Response string `json:"response,omitempty"`
	// Body is the effect's body the response carries.
	Body string `json:"body,omitempty"`
	// RetryAfter is the in-progress answer's Retry-After (path h).
	RetryAfter string `json:"retryAfter,omitempty"`
	Err        string `json:"err,omitempty"`
}

// Report is a scenario's result.
type Report struct {
	Version string      `json:"version"`
	Keys    []KeyReport `json:"keys,omitempty"`
	// Parked lists the keys ListParked returned.
	Parked []string `json:"parked,omitempty"`
	// Reconciled counts the executions the Reconciler finished.
	Reconciled int `json:"reconciled,omitempty"`
	// Relayed counts the outbox messages delivered.
	Relayed int     `json:"relayed,omitempty"`
	Ledger  *Ledger `json:"ledger,omitempty"`
	Schema  string  `json:"schema,omitempty"`
}

var (
	storeName = flag.String("store", "", "pg, mysql or redis")
	dsn       = flag.String("dsn", "", "the store's DSN (Redis: its address)")
	ns        = flag.String("ns", "", "PostgreSQL schema, MySQL table prefix or Redis key prefix of the run")
	version   = flag.String("version", "", "this build's label, written into every body it makes")
	scenario  = flag.String("scenario", "", "schema, seed, serve, roll, ledger or drop")
	gen       = flag.String("gen", "", "seed: the generation of the keys it makes")
	perState  = flag.Int("n", 5, "seed: keys per state and path")
	keysFile  = flag.String("keys", "", "serve and roll: a file of keys, one a line")
	outFile   = flag.String("out", "", "where the report goes (default stdout)")
	problems  = flag.String("problems", "", "roll: the file every problem is appended to")
	workTime  = flag.Duration("work-time", 0, "roll: how long each execution works between step a and its effect")
)

// caller is the one caller of the runs (idempotency.SingleTenant's).
const caller = ""

// Leases: the seed's live executions hold theirs well past the test, its
// dying ones run out at once; the rolling deploy's are short, so that a
// killed worker's keys are taken over quickly.
const (
	liveLease  = 10 * time.Minute
	dyingLease = time.Second
	rollLease  = 2 * time.Second
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

func run() error {
	open, ok := openers[*storeName]
	if !ok {
		return fmt.Errorf("unknown store %q", *storeName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The seed and serve scenarios migrate, as an instance that starts
	// first does; the rolling deploy's workers find the schema migrated
	// (pgstore's Migrate locks its tables against writes for its
	// transaction: docs/upgrading.md).
	migrate := *scenario == "seed" || *scenario == "serve"
	b, err := open(ctx, *dsn, *ns, migrate, migrate || *scenario == "roll")
	if err != nil {
		return err
	}
	defer b.Close()
	rep := Report{Version: *version}
	switch *scenario {
	case "schema":
		rep.Schema, err = b.Schema(ctx)
	case "seed":
		err = seed(ctx, b, &rep)
	case "serve":
		err = serve(ctx, b, &rep)
	case "roll":
		return roll(b)
	case "ledger":
		var l Ledger
		l, err = b.Ledger(ctx)
		rep.Ledger = &l
	case "drop":
		err = b.Drop(ctx)
	default:
		err = fmt.Errorf("unknown scenario %q", *scenario)
	}
	if err != nil {
		return err
	}
	return writeReport(rep)
}

func writeReport(rep Report) error {
	data, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if *outFile == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(*outFile, data, 0o644)
}

// state returns the state letter and path of a key.
func state(key string) (st, path string) {
	parts := strings.Split(key, ".")
	if len(parts) != 4 {
		return "", ""
	}
	return parts[1], parts[2]
}

// behaviour is what the seed makes an execution of key do: "" (finish),
// "block-before" (hang before anything began), "block" (hang after step
// a), "fail" or "park" (after step a).
type behaviour func(key string) string

// server serves keys with one Runner.
type server struct {
	b      backend
	runner *idempotency.Runner
	mw     http.Handler
	behave behaviour
	// reached is told when an execution hangs as its behaviour says.
	reached func()
}

func newServer(b backend, lease time.Duration, behave behaviour, reached func()) *server {
	s := &server{b: b, behave: behave, reached: reached}
	s.runner = idempotency.NewRunner(b.Store(), idempotency.WithLease(lease))
	s.runner.Register("job", s.job)
	s.mw = idempotency.Middleware(s.runner, idempotency.SingleTenant, idempotency.WithResume("orders"))(http.HandlerFunc(s.handle))
	return s
}

// job is every key's execution: step a, then the local effect.
func (s *server) job(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
	key := e.Key()
	how := ""
	if s.behave != nil {
		how = s.behave(key)
	}
	if how == "block-before" {
		s.hang()
	}
	if how == "fail-before" {
		return nil, errors.New("seed: failed before step a")
	}
	if _, err := e.Step(ctx, "a", func(ctx context.Context, dk string) ([]byte, error) {
		return []byte("a done"), s.b.Call(ctx, key, "a", dk)
	}); err != nil {
		return nil, err
	}
	switch how {
	case "block":
		s.hang()
	case "fail":
		return nil, errors.New("seed: failed after step a")
	case "park":
		return nil, idempotency.Park(errors.New("seed: parked after step a"))
	}
	if *workTime > 0 {
		time.Sleep(*workTime) // the work itself, so that kills find executions in flight
	}
	body, err := s.b.Effect(ctx, key, fmt.Sprintf("%s|%s|%d|%s", key, *version, e.Attempt(), nonce()))
	return []byte(body), err
}

// hang stops the execution for good: the seed's process exits under it.
func (s *server) hang() {
	s.reached()
	select {}
}

// handle is the Middleware's handler: job, answered 201.
func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	e := idempotency.FromContext(r.Context())
	body, err := s.job(r.Context(), e)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Executed-By", *version)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// serveKey serves key once, through the Middleware or Runner.Do.
func (s *server) serveKey(ctx context.Context, key string) KeyReport {
	_, path := state(key)
	if path == "h" {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(`{"order":"`+key+`"}`))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		s.mw.ServeHTTP(rec, req)
		return httpReport(key, rec)
	}
	res, err := s.runner.Do(ctx, idempotency.Request{Caller: caller, Key: key, Fingerprint: "job:" + key, Work: "job", Input: []byte(key)}, s.job)
	return workReport(key, res, err)
}

// httpReport reads a Middleware's answer.
func httpReport(key string, rec *httptest.ResponseRecorder) KeyReport {
	kr := KeyReport{Key: key}
	h := rec.Header()
	switch {
	case rec.Code == http.StatusConflict:
		kr.Outcome, kr.RetryAfter = "in_progress", h.Get("Retry-After")
		return kr
	case rec.Code != http.StatusCreated:
		kr.Outcome, kr.Err = "error", fmt.Sprintf("status %d: %s", rec.Code, rec.Body.String())
		return kr
	case h.Get("Idempotent-Replayed") == "true":
		kr.Outcome = "replayed"
	default:
		kr.Outcome = "executed"
	}
	kr.Body = rec.Body.String()
	kr.Response = fmt.Sprintf("%d\nContent-Type: %s\nX-Executed-By: %s\n\n%s", rec.Code, h.Get("Content-Type"), h.Get("X-Executed-By"), kr.Body)
	return kr
}

// workReport reads Runner.Do's answer.
func workReport(key string, res idempotency.Result, err error) KeyReport {
	kr := KeyReport{Key: key}
	var ip *idempotency.InProgressError
	switch {
	case errors.As(err, &ip):
		kr.Outcome = "in_progress"
		return kr
	case err != nil:
		kr.Outcome, kr.Err = "error", err.Error()
		return kr
	case res.Replayed:
		kr.Outcome = "replayed"
	default:
		kr.Outcome = "executed"
	}
	kr.Body, kr.Response = string(res.Response), string(res.Response)
	return kr
}

// seed leaves records of generation *gen in every state this version can
// make, then exits with the executions it left hanging.
func seed(ctx context.Context, b backend, rep *Report) error {
	keys := map[string][]string{}
	for _, st := range []string{"c", "l", "x", "u", "s", "p", "m"} {
		if st == "m" && markedRequest == nil {
			continue
		}
		for _, path := range []string{"h", "w"} {
			if path == "h" && st != "c" && st != "l" && st != "x" && st != "u" {
				continue // a handler's failure is a stored 500, not a stalled execution
			}
			for i := range *perState {
				keys[st] = append(keys[st], fmt.Sprintf("%s.%s.%s.%d", *gen, st, path, i))
			}
		}
	}
	behave := func(key string) string {
		st, _ := state(key)
		return map[string]string{"l": "block", "x": "block", "u": "block-before", "s": "fail", "p": "park", "m": "fail-before"}[st]
	}
	var hanging sync.WaitGroup
	short := newServer(b, dyingLease, behave, hanging.Done)
	long := newServer(b, liveLease, behave, hanging.Done)
	for _, key := range append(keys["c"], append(keys["s"], keys["p"]...)...) {
		kr := short.serveKey(ctx, key)
		rep.Keys = append(rep.Keys, kr)
	}
	for _, key := range keys["m"] {
		res, err := short.runner.Do(ctx, markedRequest(key), short.job)
		rep.Keys = append(rep.Keys, workReport(key, res, err))
	}
	// Half the outbox delivered by this version, the rest left.
	n, err := b.Relay(ctx)
	if err != nil {
		return err
	}
	rep.Relayed = n
	for _, key := range append(keys["l"], append(keys["x"], keys["u"]...)...) {
		s := short
		if st, _ := state(key); st == "l" {
			s = long
		}
		hanging.Add(1)
		go func() {
			kr := s.serveKey(context.WithoutCancel(ctx), key)
			// Reached only if the execution did not hang.
			fmt.Fprintf(os.Stderr, "driver: %s did not hang: %+v\n", key, kr)
			os.Exit(2)
		}()
	}
	hanging.Wait()
	for _, st := range []string{"l", "x", "u"} {
		for _, key := range keys[st] {
			rep.Keys = append(rep.Keys, KeyReport{Key: key, Outcome: "hanging"})
		}
	}
	if err := writeReport(*rep); err != nil {
		return err
	}
	// The hanging executions die with the process, holding their keys.
	os.Exit(0)
	return nil
}

// markedRequest is the request of a claim with the started mark, for
// versions that have it (set by marked.go), else nil.
var markedRequest func(key string) idempotency.Request

// readKeys reads the keys file.
func readKeys() ([]string, error) {
	f, err := os.Open(*keysFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k := strings.TrimSpace(sc.Text()); k != "" {
			keys = append(keys, k)
		}
	}
	return keys, sc.Err()
}

// serve serves the keys of the keys file as a client coming back would,
// after the Reconciler finished what stalled: stalled executions (x, s, m)
// are resumed by the Reconciler, parked ones (p) listed and retried, the
// others requested again (those whose lease has not run out yet, u,
// until it has). Then it delivers the outbox.
func serve(ctx context.Context, b backend, rep *Report) error {
	keys, err := readKeys()
	if err != nil {
		return err
	}
	s := newServer(b, rollLease, nil, nil)
	stalled := map[string]bool{}
	for _, k := range keys {
		if st, _ := state(k); st == "x" || st == "s" || st == "m" {
			stalled[k] = true
		}
	}
	// The Reconciler, until every stalled execution is completed (their
	// leases run out a second after the seed's claims at most).
	cfg := idempotency.ReconcilerConfig{MaxAttempts: 100}
	for deadline := time.Now().Add(20 * time.Second); len(stalled) > 0; {
		n, err := reconcile(ctx, s.runner, cfg)
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		rep.Reconciled += n
		for k := range stalled {
			if r, err := b.Store().Get(ctx, caller, k); err == nil && r.State == idempotency.StateCompleted {
				delete(stalled, k)
			}
		}
		if len(stalled) > 0 && time.Now().After(deadline) {
			return fmt.Errorf("the Reconciler did not finish %d stalled executions in 20 s: %v", len(stalled), sortedKeys(stalled))
		}
		if n == 0 && len(stalled) > 0 {
			time.Sleep(50 * time.Millisecond) // their leases run out
		}
	}
	parked, err := b.Store().ListParked(ctx, "", "", 1000)
	if err != nil {
		return fmt.Errorf("list parked: %w", err)
	}
	for _, r := range parked {
		rep.Parked = append(rep.Parked, r.Key)
	}
	for _, key := range keys {
		var kr KeyReport
		switch st, _ := state(key); st {
		case "p":
			if r, err := b.Store().Get(ctx, caller, key); err == nil && r.Parked != "" {
				res, err := s.runner.RetryParked(ctx, caller, key)
				kr = workReport(key, res, err)
			} else {
				kr = s.serveKey(ctx, key)
			}
		case "u":
			for deadline := time.Now().Add(10 * time.Second); ; {
				if kr = s.serveKey(ctx, key); kr.Outcome != "in_progress" || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond) // its lease runs out
			}
		default:
			kr = s.serveKey(ctx, key)
		}
		rep.Keys = append(rep.Keys, kr)
	}
	// Until every outbox message is delivered: a message whose row a
	// killed worker's relay still locks is skipped (SKIP LOCKED) until the
	// database has seen that connection end.
	for deadline := time.Now().Add(15 * time.Second); ; {
		n, err := b.Relay(ctx)
		if err != nil {
			return fmt.Errorf("relay: %w", err)
		}
		rep.Relayed += n
		if n > 0 {
			continue
		}
		l, err := b.Ledger(ctx)
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		if l.Outbox == nil || l.Outbox.Undelivered == 0 || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nonce returns 8 random bytes in hex: two executions of a key never make
// the same body.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
