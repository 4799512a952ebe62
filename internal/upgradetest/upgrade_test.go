package upgradetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// oldCommit is the previous release the test upgrades from: the version
// the team of issue 44 upgraded from, an ancestor of main.
const oldCommit = "fe6ce55"

// Sizes: keys per state and path of a seed, keys of the rolling deploy
// (half served through the Middleware, half through Runner.Do), workers of
// each version, and how long workers are killed (one every killEvery).
const (
	perState     = 10
	rollKeys     = 1200
	workersEach  = 2
	killEvery    = 500 * time.Millisecond
	killDuration = 6 * time.Second
	// workTime is how long each execution of the rolling deploy works, so
	// that the kills find executions in flight.
	workTime = 5 * time.Millisecond
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is a store the test runs on.
type service struct {
	name, dsn, addr, start string
}

var services = []service{
	{"pg", env("EXACTLYONCE_PG_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "127.0.0.1:5432", "PostgreSQL: pg_ctlcluster <version> main start"},
	{"mysql", env("EXACTLYONCE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test"), "127.0.0.1:3306", "MariaDB: start-stop-daemon --start --background --exec \"$(command -v mariadbd)\""},
	{"redis", env("EXACTLYONCE_REDIS_ADDR", "127.0.0.1:6379"), env("EXACTLYONCE_REDIS_ADDR", "127.0.0.1:6379"), "Redis: redis-server --daemonize yes"},
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// storeModule is the directory of each store's module.
var storeModule = map[string]string{"pg": "pgstore", "mysql": "mysqlstore", "redis": "redisstore"}

// TestUpgrade upgrades each store from oldCommit to this checkout and back,
// with both versions built as drivers (see driver/main.go):
//
//   - in place: the old version leaves records in every state it makes,
//     the new one migrates (the schema must not change) and serves them;
//   - rolling: two workers of each version serve the same keys while one
//     of them is killed every 0.5 s;
//   - rollback: the new version leaves records in every state, the old one
//     serves them, and every key either version completed before.
//
// Every key must be executed once (one effect in the ledger, step a called
// once outside the rolling deploy's kills), every completed key replayed
// byte for byte by both versions, and nothing may fail.
func TestUpgrade(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	oldTree := filepath.Join(dir, "old")
	extract(t, root, oldTree)
	newBin := filepath.Join(dir, "driver-new")
	build(t, ".", newBin, "./driver")
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			if c, err := net.DialTimeout("tcp", svc.addr, 2*time.Second); err != nil {
				t.Fatalf("%s is not reachable on %s (%v): the upgrade test runs on it; start it (%s)", svc.name, svc.addr, err, svc.start)
			} else {
				_ = c.Close()
			}
			oldBin := buildOld(t, oldTree, svc.name, filepath.Join(dir, "driver-old-"+svc.name))
			r := &run{t: t, svc: svc, dir: t.TempDir(), ns: "upg_" + randomHex(4) + "_",
				bins: map[string]string{"old": oldBin, "new": newBin}}
			t.Cleanup(r.drop)
			for _, phase := range []struct {
				name string
				run  func()
			}{{"in place", r.inPlace}, {"rolling", r.rolling}, {"rollback", r.rollback}} {
				began := time.Now()
				phase.run()
				t.Logf("%s: %v", phase.name, time.Since(began).Round(100*time.Millisecond))
			}
		})
	}
}

// repoRoot returns the repository's top directory, failing the test when
// oldCommit is not in its history.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the upgrade test needs the repository's git history (git rev-parse: %v)", err)
	}
	root := strings.TrimSpace(string(out))
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", oldCommit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("commit %s, the release the upgrade test starts from, is not in this clone's history (%v: %s): clone with full history (git fetch --unshallow)", oldCommit, err, bytes.TrimSpace(out))
	}
	return root
}

// extract writes oldCommit's tree into dst.
func extract(t *testing.T, root, dst string) {
	t.Helper()
	tarball := dst + ".tar"
	if out, err := exec.Command("git", "-C", root, "archive", "--format=tar", "-o", tarball, oldCommit).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v: %s", oldCommit, err, out)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xf", tarball, "-C", dst).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
}

// build runs go build in dir (with that tree's own go.work or go.mod).
func build(t *testing.T, dir, out, pkg string, flags ...string) {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s in %s: %v\n%s", pkg, dir, err, b)
	}
}

// buildOld copies the driver (main.go, roll.go, the store's file and the
// old names of compat_old.go and the store's <store>_old.go, if any; not
// marked.go: the old API has no Request.StartedAtClaim) into the old tree's
// store module and builds it there with the tag upgradeold.
func buildOld(t *testing.T, oldTree, store, out string) string {
	t.Helper()
	mod := filepath.Join(oldTree, "idempotency", storeModule[store])
	dst := filepath.Join(mod, "upgradedriver")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"main.go", "roll.go", store + ".go", "compat_old.go", store + "_old.go"} {
		b, err := os.ReadFile(filepath.Join("driver", f))
		if errors.Is(err, fs.ErrNotExist) && f == store+"_old.go" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build(t, mod, out, "./upgradedriver", "-tags", "upgradeold")
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Report and the types in it are the driver's (driver/main.go).
type Report struct {
	Version    string      `json:"version"`
	Keys       []KeyReport `json:"keys"`
	Parked     []string    `json:"parked"`
	Reconciled int         `json:"reconciled"`
	Relayed    int         `json:"relayed"`
	Ledger     *Ledger     `json:"ledger"`
	Schema     string      `json:"schema"`
}

type KeyReport struct {
	Key        string `json:"key"`
	Outcome    string `json:"outcome"`
	Response   string `json:"response"`
	Body       string `json:"body"`
	RetryAfter string `json:"retryAfter"`
	Err        string `json:"err"`
}

type Ledger struct {
	Effects map[string][]string       `json:"effects"`
	Calls   map[string]map[string]int `json:"calls"`
	Outbox  *OutboxLedger             `json:"outbox"`
}

type OutboxLedger struct {
	Messages    map[string]int `json:"messages"`
	Undelivered int            `json:"undelivered"`
	Deliveries  map[string]int `json:"deliveries"`
}

// run is one store's upgrade.
type run struct {
	t    *testing.T
	svc  service
	dir  string
	ns   string
	bins map[string]string
	// responses are the responses of every completed key, as first given.
	responses map[string]string
	n         int
}

// args returns the driver's arguments.
func (r *run) args(version, scenario string, extra ...string) []string {
	return append([]string{"-store", r.svc.name, "-dsn", r.svc.dsn, "-ns", r.ns, "-version", version, "-scenario", scenario}, extra...)
}

// driver runs a driver to its end and returns its report.
func (r *run) driver(version, scenario string, extra ...string) Report {
	r.t.Helper()
	r.n++
	out := filepath.Join(r.dir, fmt.Sprintf("%d-%s-%s.json", r.n, version, scenario))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bins[version], r.args(version, scenario, append(extra, "-out", out)...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("%s driver, %s: %v\n%s", version, scenario, err, stderr.Bytes())
	}
	var rep Report
	if scenario != "drop" {
		b, err := os.ReadFile(out)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			r.t.Fatalf("%s driver, %s: its report: %v", version, scenario, err)
		}
	}
	return rep
}

// drop removes the run's schema, tables or keys. A killed worker's
// session may outlive it for a moment on the server (and deadlock with
// DROP SCHEMA): it tries a few times.
func (r *run) drop() {
	var err error
	for range 5 {
		cmd := exec.Command(r.bins["new"], r.args("new", "drop")...)
		var out []byte
		if out, err = cmd.CombinedOutput(); err == nil {
			return
		}
		err = fmt.Errorf("%w: %s", err, out)
	}
	r.t.Errorf("clean up %s: %v", r.ns, err)
}

// keysFile writes keys to a file for the driver.
func (r *run) keysFile(name string, keys []string) string {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(keys, "\n")+"\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
	return path
}

func (r *run) ledger() Ledger {
	r.t.Helper()
	return *r.driver("new", "ledger").Ledger
}

// state returns a key's state letter (see driver/main.go).
func state(key string) string {
	parts := strings.Split(key, ".")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

// inPlace: the old version seeds, the new one migrates and serves.
func (r *run) inPlace() {
	t := r.t
	seed := r.driver("old", "seed", "-gen", "o", "-n", fmt.Sprint(perState))
	before := r.driver("new", "schema").Schema
	served := r.serveAndCheck("in place", "old", "new", seed)
	after := r.driver("new", "schema").Schema
	if before != after {
		t.Errorf("the new version's Migrate changed the old schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if before == "" {
		t.Logf("in place: no schema to migrate (%s)", r.svc.name)
	} else {
		t.Logf("in place: schema unchanged by the new Migrate (%d lines compared)", strings.Count(before, "\n")+1)
	}
	r.responses = map[string]string{}
	for _, kr := range append(seed.Keys, served.Keys...) {
		if kr.Response != "" {
			r.responses[kr.Key] = kr.Response
		}
	}
}

// serveAndCheck has to serve seed's keys and checks what it answered and
// left: completed keys replayed byte for byte, live leases answered in
// progress, every other key executed once (step a once, one effect) and
// answered with its effect's body, parked ones listed.
func (r *run) serveAndCheck(phase, seeder, to string, seed Report) Report {
	t := r.t
	var keys []string
	for _, kr := range seed.Keys {
		keys = append(keys, kr.Key)
		if st := state(kr.Key); st == "c" && kr.Outcome != "executed" || st == "s" && kr.Outcome != "error" || st == "p" && kr.Outcome != "error" {
			t.Errorf("%s: the %s seed's %s: %s %s", phase, seeder, kr.Key, kr.Outcome, kr.Err)
		}
	}
	served := r.driver(to, "serve", "-keys", r.keysFile(phase+".keys", keys))
	l := r.ledger()
	first := map[string]KeyReport{}
	for _, kr := range seed.Keys {
		first[kr.Key] = kr
	}
	counts := map[string]int{}
	var replayed, inProgress, executed, errs int
	for _, kr := range served.Keys {
		st := state(kr.Key)
		counts[st]++
		bodies := l.Effects[kr.Key]
		switch {
		case kr.Outcome == "error":
			errs++
			t.Errorf("%s: %s: %s", phase, kr.Key, kr.Err)
		case st == "l":
			if kr.Outcome != "in_progress" || strings.Contains(kr.Key, ".h.") && kr.RetryAfter == "" {
				t.Errorf("%s: %s (live lease): %s (Retry-After %q), want in progress with a Retry-After", phase, kr.Key, kr.Outcome, kr.RetryAfter)
			}
			if len(bodies) != 0 {
				t.Errorf("%s: %s (live lease): effects %q", phase, kr.Key, bodies)
			}
			inProgress++
		case st == "c":
			if kr.Outcome != "replayed" || kr.Response != first[kr.Key].Response {
				t.Errorf("%s: %s: %s %q, want replayed %q", phase, kr.Key, kr.Outcome, kr.Response, first[kr.Key].Response)
			} else {
				replayed++
			}
		default:
			executed++
		}
		if st != "l" && (len(bodies) != 1 || bodies[0] != kr.Body) {
			t.Errorf("%s: %s answered %q (%s), the ledger holds the effects %q", phase, kr.Key, kr.Body, kr.Outcome, bodies)
		}
		if calls := l.Calls[kr.Key]["a"]; calls != 1 {
			t.Errorf("%s: %s: step a called %d times, want once", phase, kr.Key, calls)
		}
		if r.svc.name == "redis" && st != "l" && l.Calls[kr.Key]["effect"] != 1 {
			t.Errorf("%s: %s: the effect step called %d times, want once", phase, kr.Key, l.Calls[kr.Key]["effect"])
		}
	}
	if len(served.Keys) != len(seed.Keys) {
		t.Errorf("%s: %d keys served, %d seeded", phase, len(served.Keys), len(seed.Keys))
	}
	var parked []string
	for _, k := range keys {
		if state(k) == "p" {
			parked = append(parked, k)
		}
	}
	sort.Strings(served.Parked)
	if !slices.Equal(served.Parked, parked) {
		t.Errorf("%s: the %s version listed the parked %q, want %q", phase, to, served.Parked, parked)
	}
	r.checkOutbox(phase, l, keys, false)
	t.Logf("%s (%s wrote, %s served): %d keys (per state %v): %d completed replayed byte for byte, %d live leases answered in progress, %d executed once (%d by the Reconciler, %d parked retried), %d errors",
		phase, seeder, to, len(served.Keys), counts, replayed, inProgress, executed, served.Reconciled, len(parked), errs)
	return served
}

// checkOutbox checks that every effect enqueued one message and that every
// message was delivered once (PostgreSQL), or at least once when relays
// were killed (again: a relay delivers at least once).
func (r *run) checkOutbox(phase string, l Ledger, keys []string, killed bool) {
	if l.Outbox == nil {
		return
	}
	t := r.t
	dup, messages := 0, 0
	for _, key := range keys {
		bodies := l.Effects[key]
		if len(bodies) == 0 {
			continue // a live lease's: nothing executed yet
		}
		messages += l.Outbox.Messages[key]
		if l.Outbox.Messages[key] != len(bodies) {
			t.Errorf("%s: %s: %d outbox messages for %d effects", phase, key, l.Outbox.Messages[key], len(bodies))
		}
		switch d := l.Outbox.Deliveries[key]; {
		case d == 0 || d > 1 && !killed:
			t.Errorf("%s: %s: delivered %d times, want once", phase, key, d)
		case d > 1:
			dup += d - 1
		}
	}
	if l.Outbox.Undelivered != 0 {
		t.Errorf("%s: %d outbox messages undelivered", phase, l.Outbox.Undelivered)
	}
	t.Logf("%s: outbox: %d messages, one per effect, delivered by the relays of both versions (%d delivered again after a relay was killed), %d undelivered", phase, messages, dup, l.Outbox.Undelivered)
}

// worker is one process of the rolling deploy.
type worker struct {
	version string
	cmd     *exec.Cmd
	stderr  *bytes.Buffer
	done    chan error
	out     string
	// exited is set once done was received.
	exited bool
}

// rolling: two workers of each version serve the same keys, one of them
// killed (SIGKILL) every killEvery for killDuration and started again;
// then every key must have one effect and be replayed byte for byte by
// both versions.
func (r *run) rolling() {
	t := r.t
	var keys []string
	for i := range rollKeys {
		path := "h"
		if i%2 == 1 {
			path = "w"
		}
		keys = append(keys, fmt.Sprintf("r.r.%s.%d", path, i))
	}
	keysPath := r.keysFile("roll.keys", keys)
	problems := filepath.Join(r.dir, "roll.problems")
	var (
		mu      sync.Mutex
		workers []*worker
		starts  int
	)
	start := func(i int, version string) *worker {
		mu.Lock()
		defer mu.Unlock()
		starts++
		w := &worker{version: version, stderr: new(bytes.Buffer), done: make(chan error, 1),
			out: filepath.Join(r.dir, fmt.Sprintf("roll-%d-%d.json", i, starts))}
		w.cmd = exec.Command(r.bins[version], r.args(version, "roll", "-keys", keysPath, "-work-time", workTime.String(), "-problems", problems, "-out", w.out)...)
		w.cmd.Stderr = w.stderr
		if err := w.cmd.Start(); err != nil {
			t.Fatalf("start a %s worker: %v", version, err)
		}
		go func() { w.done <- w.cmd.Wait() }()
		return w
	}
	for i := range 2 * workersEach {
		version := "old"
		if i%2 == 1 {
			version = "new"
		}
		workers = append(workers, start(i, version))
	}
	t.Cleanup(func() {
		for _, w := range workers {
			if !w.exited {
				_ = w.cmd.Process.Kill()
				<-w.done
			}
		}
	})
	began := time.Now()
	kills := map[string]int{}
	tick := time.NewTicker(killEvery)
	for range int(killDuration / killEvery) {
		<-tick.C // the kills' pace, not a wait for a condition
		i := mrand.IntN(len(workers))
		w := workers[i]
		if err := w.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		err := <-w.done
		w.exited = true
		var ee *exec.ExitError
		if errors.As(err, &ee) && !ee.Exited() {
			kills[w.version]++
		} else if err != nil {
			t.Fatalf("a %s worker failed before it was killed: %v\n%s", w.version, err, w.stderr.Bytes())
		}
		// Killed, or finished before its kill: its report is dropped, and
		// it serves the keys again from the start.
		workers[i] = start(i, w.version)
	}
	tick.Stop()
	// The workers finish once each saw every key completed.
	executedBy := map[string]int{}
	for _, w := range workers {
		select {
		case err := <-w.done:
			w.exited = true
			if err != nil {
				t.Fatalf("a %s worker: %v\n%s", w.version, err, w.stderr.Bytes())
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("a %s worker did not finish in 2 minutes after the kills", w.version)
		}
	}
	took := time.Since(began)
	if b, err := os.ReadFile(problems); err == nil && len(b) > 0 {
		t.Errorf("rolling: the workers found problems:\n%s", b)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	l := r.ledger()
	var effects, effectCalls, aCalls, takenOver int
	for _, k := range keys {
		bodies := l.Effects[k]
		if len(bodies) != 1 {
			t.Errorf("rolling: %s has %d effects %q, want 1", k, len(bodies), bodies)
			continue
		}
		effects++
		fields := strings.Split(bodies[0], "|") // key|version|attempt|nonce
		executedBy[fields[1]]++
		if fields[2] != "1" {
			takenOver++
		}
		aCalls += l.Calls[k]["a"]
		effectCalls += l.Calls[k]["effect"]
	}
	// Both versions replay every key byte for byte.
	keysFile := r.keysFile("roll-verify.keys", keys)
	for _, version := range []string{"new", "old"} {
		rep := r.driver(version, "serve", "-keys", keysFile)
		ok := 0
		for _, kr := range rep.Keys {
			if bodies := l.Effects[kr.Key]; kr.Outcome != "replayed" || len(bodies) != 1 || kr.Body != bodies[0] {
				t.Errorf("rolling: the %s version answered %s with %s %q, the ledger holds %q", version, kr.Key, kr.Outcome, kr.Body, bodies)
			} else {
				ok++
				r.responses[kr.Key] = kr.Response
			}
		}
		t.Logf("rolling: the %s version replayed %d of %d keys byte for byte", version, ok, len(keys))
	}
	// The outbox once a relay ran after the workers: each worker's relay
	// stops with it, so a message enqueued by the last execution may be
	// left for the next instance, as in a deploy the next relay delivers it.
	r.checkOutbox("rolling", r.ledger(), keys, true)
	extra := ""
	if r.svc.name == "redis" {
		extra = fmt.Sprintf(" (the effect step's downstream called %d times for %d keys: a kill between its call and its recorded end calls it again with the same key)", effectCalls, len(keys))
	}
	t.Logf("rolling: %d keys, %d old and %d new workers, %d kills (old %d, new %d) in %v: %d keys with one effect each (executed by old %d, new %d; %d by an attempt that took over a killed one), step a called %d times%s, problems none",
		len(keys), workersEach, workersEach, kills["old"]+kills["new"], kills["old"], kills["new"], took.Round(100*time.Millisecond),
		effects, executedBy["old"], executedBy["new"], takenOver, aCalls, extra)
}

// rollback: the new version seeds, the old one serves its keys, and then
// replays every key completed before.
func (r *run) rollback() {
	t := r.t
	seed := r.driver("new", "seed", "-gen", "n", "-n", fmt.Sprint(perState))
	served := r.serveAndCheck("rollback", "new", "old", seed)
	for _, kr := range append(seed.Keys, served.Keys...) {
		if kr.Response != "" {
			r.responses[kr.Key] = kr.Response
		}
	}
	// Every key completed so far, replayed by the old version.
	var keys []string
	for k := range r.responses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rep := r.driver("old", "serve", "-keys", r.keysFile("rollback-all.keys", keys))
	ok := 0
	for _, kr := range rep.Keys {
		if kr.Outcome != "replayed" || kr.Response != r.responses[kr.Key] {
			t.Errorf("rollback: the old version answered %s with %s %q, want replayed %q", kr.Key, kr.Outcome, kr.Response, r.responses[kr.Key])
		} else {
			ok++
		}
	}
	t.Logf("rollback: the old version replayed %d of %d keys completed by either version byte for byte", ok, len(keys))
}
