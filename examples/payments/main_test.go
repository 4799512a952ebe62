package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func TestDemoShortRun(t *testing.T) {
	cfg := defaultConfig()
	cfg.Charges = shortCharges
	cfg.Seed = 7
	cfg.Drop, cfg.Reset = 0.1, 0.05
	cfg.Latency = time.Millisecond
	cfg.Concurrency = 8
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	rs, err := run(ctx, cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if len(rs) != 2 {
		t.Fatalf("got %d results, want 2", len(rs))
	}
	ours, naive := rs[0], rs[1]
	if ours.Executed != cfg.Charges || ours.Distinct != cfg.Charges || ours.Duplicates != 0 || ours.Failures != 0 {
		t.Errorf("ours = %+v, want every charge executed once and no failures", ours)
	}
	if ours.Drops == 0 || ours.Resets == 0 {
		t.Errorf("ours met no faults (%+v): the seed no longer exercises retries", ours)
	}
	// The faults are a pure function of the seed and the body, so the naive
	// client meets the same drops and repeats a charge for each of them.
	if naive.Duplicates == 0 {
		t.Errorf("naive = %+v, want duplicates with seed %d", naive, cfg.Seed)
	}
	if naive.Executed != naive.Distinct+naive.Duplicates {
		t.Errorf("naive = %+v: executed != distinct + duplicates", naive)
	}
	out := stdout.String()
	for _, want := range []string{"charges requested", "duplicates", "exactlyonce (key)", "naive loop (no key)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "stuck") || strings.Contains(out, "crash") {
		t.Errorf("without -crash the table has crash figures:\n%s", out)
	}
	if n := strings.Count(stderr.String(), "%  "); n != 20 {
		t.Errorf("got %d progress lines, want 10 per client:\n%s", n, stderr.String())
	}
}

func TestBadFlagsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "0"},
		{"-n", "x"},
		{"-drop", "1.5"},
		{"-drop", "0.4", "-reset", "0.4"},
		{"-concurrency", "0"},
		{"-latency", "-1s"},
		{"-nosuchflag"},
		{"-otel", "jaeger"},
		{"-crash=maybe"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := realMain(args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit code %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), "usage: payments") {
			t.Errorf("%q: no usage message:\n%s", args, stderr.String())
		}
	}
}

// With -otel=stdout the metrics of both halves reach stderr as JSON, and
// the table is alone on stdout.
func TestDemoOTelStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"-n", "40", "-concurrency", "4", "-otel=stdout"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, want 0:\n%s", code, stderr.String())
	}
	for _, want := range []string{
		`"Name":"exactlyonce.retry.attempts"`,
		`"Name":"exactlyonce.idempotency.outcomes"`,
		`"Name":"exactlyonce.retry.budget.tokens"`,
		`"Value":"executed"`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the telemetry lacks %s:\n%s", want, stderr.String())
		}
	}
	if out := stdout.String(); !strings.Contains(out, "charges requested") || strings.Contains(out, "exactlyonce.") {
		t.Errorf("stdout is not the table alone:\n%s", out)
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestShortFlag(t *testing.T) {
	cfg, err := parseFlags([]string{"-short"}, new(bytes.Buffer))
	if err != nil || cfg.Charges != shortCharges {
		t.Errorf("-short: %+v, %v; want %d charges", cfg, err, shortCharges)
	}
	cfg, err = parseFlags([]string{"-short", "-n", "20"}, new(bytes.Buffer))
	if err != nil || cfg.Charges != 20 {
		t.Errorf("-short -n 20: %+v, %v; want 20 charges", cfg, err)
	}
}

func TestCrashFlag(t *testing.T) {
	cfg, err := parseFlags(nil, new(bytes.Buffer))
	if err != nil || cfg.Crash {
		t.Errorf("no flags: %+v, %v; want no crash", cfg, err)
	}
	cfg, err = parseFlags([]string{"-crash"}, new(bytes.Buffer))
	if err != nil || !cfg.Crash {
		t.Errorf("-crash: %+v, %v; want a crash", cfg, err)
	}
}

// The ledger deduplicates like a payment provider: the key of an earlier
// charge gets that charge's id and performs nothing; no key performs
// every time.
func TestLedgerDeduplicatesByKey(t *testing.T) {
	l := newLedger()
	first := l.charge("order-1", "k1")
	if again := l.charge("order-1", "k1"); again != first {
		t.Errorf("the same key got charge %s, then %s", first, again)
	}
	if other := l.charge("order-2", "k2"); other == first {
		t.Errorf("another key got the same charge %s", other)
	}
	l.charge("order-3", "")
	l.charge("order-3", "")
	executed, distinct := l.totals()
	if executed != 4 || distinct != 3 || l.deduplications() != 1 {
		t.Errorf("executed %d, distinct %d, deduplicated %d; want 4, 3, 1", executed, distinct, l.deduplications())
	}
}

// With -crash the service is killed once per client between a charge and
// its completion and restarted on the same store: our client still gets
// every charge performed once, and nothing is left in progress.
func TestDemoCrash(t *testing.T) {
	testCrash(t, storeMemory)
}

func TestDemoCrashOnPostgres(t *testing.T) {
	testCrash(t, storePostgres)
}

func TestDemoCrashOnRedis(t *testing.T) {
	testCrash(t, storeRedis)
}

func TestDemoCrashOnMySQL(t *testing.T) {
	testCrash(t, storeMySQL)
}

// testCrash runs the demo with -crash -n 120 on store and checks what
// became of the charges.
func testCrash(t *testing.T, store string) {
	cfg := defaultConfig()
	cfg.Charges = 120
	cfg.Concurrency = 8
	cfg.Crash = true
	cfg.Store = store
	ctx, cancel := context.WithTimeout(context.Background(), maxRunTime)
	defer cancel()
	requireStore(t, ctx, cfg)
	var stdout, stderr bytes.Buffer
	rs, err := run(ctx, cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run -crash on %s: %v\n%s", store, err, stderr.String())
	}
	if len(rs) != 2 {
		t.Fatalf("got %d results, want 2", len(rs))
	}
	ours, naive := rs[0], rs[1]
	if ours.Executed != cfg.Charges || ours.Distinct != cfg.Charges || ours.Duplicates != 0 || ours.Failures != 0 || ours.Stuck != 0 {
		t.Errorf("ours = %+v, want every charge executed once, no failures and nothing stuck", ours)
	}
	for _, r := range rs {
		if !r.Crashed || r.CrashedInFlight < 1 || r.KilledAt < 1 || r.KilledAt > r.Executed {
			t.Errorf("%s = %+v, want a crash with a request in flight", r.Client, r)
		}
	}
	// The request whose charge set the crash off was frozen between its
	// charge and its completion: the Reconciler or its client's retry
	// finished it.
	if ours.Reconciled+ours.TakenOver < 1 {
		t.Errorf("ours = %+v, want the crash's executions finished by the reconciler or a retry", ours)
	}
	if naive.Stuck != 0 || naive.Reconciled+naive.TakenOver != 0 || naive.Executed != naive.Distinct+naive.Duplicates {
		t.Errorf("naive = %+v, want no records to finish", naive)
	}
	out := stdout.String()
	for _, want := range []string{"stuck", "crash, exactlyonce (key): killed at charge", "crash, naive loop (no key): killed at charge"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(stderr.String(), "killed the service at charge"); n != 2 {
		t.Errorf("got %d kills on stderr, want one per client:\n%s", n, stderr.String())
	}
}

func TestFaultPlanIsPure(t *testing.T) {
	p := faultPlan{seed: 3, drop: 0.2, reset: 0.2, latency: time.Millisecond}
	counts := map[fault]int{}
	for i := range 1000 {
		body := []byte{byte(i), byte(i >> 8)}
		f1, d1 := p.decide(body, 1)
		f2, d2 := p.decide(body, 1)
		if f1 != f2 || d1 != d2 {
			t.Fatalf("decide is not deterministic for %v", body)
		}
		if d1 < 0 || d1 > time.Millisecond {
			t.Fatalf("latency %v outside [0, 1ms]", d1)
		}
		counts[f1]++
	}
	for _, f := range []fault{faultNone, faultReset, faultDrop} {
		if counts[f] == 0 {
			t.Errorf("fault %d never chosen: %v", f, counts)
		}
	}
	if f, _ := (faultPlan{seed: 3}).decide([]byte("x"), 1); f != faultNone {
		t.Errorf("zero rates injected fault %d", f)
	}
}

func TestDemoOnPostgres(t *testing.T) {
	testDemoOn(t, storePostgres)
}

func TestDemoOnRedis(t *testing.T) {
	testDemoOn(t, storeRedis)
}

func TestDemoOnMySQL(t *testing.T) {
	testDemoOn(t, storeMySQL)
}

// testDemoOn runs a short demo on store: every charge executed once.
func testDemoOn(t *testing.T, store string) {
	cfg := defaultConfig()
	cfg.Charges = shortCharges
	cfg.Drop, cfg.Reset = 0.1, 0.05
	cfg.Latency = time.Millisecond
	cfg.Store = store
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	requireStore(t, ctx, cfg)
	var stdout, stderr bytes.Buffer
	rs, err := run(ctx, cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run on %s: %v\n%s", store, err, stderr.String())
	}
	ours := rs[0]
	if ours.Executed != cfg.Charges || ours.Duplicates != 0 || ours.Failures != 0 {
		t.Errorf("ours on %s = %+v, want every charge executed once and no failures", store, ours)
	}
	if !strings.Contains(stderr.String(), store+" store") {
		t.Errorf("the run does not say which store it used:\n%s", stderr.String())
	}
}

// requireStore fails the test unless the server of cfg.Store answers.
func requireStore(t *testing.T, ctx context.Context, cfg config) {
	t.Helper()
	switch cfg.Store {
	case storePostgres:
		requirePostgres(t, ctx, cfg.DSN)
	case storeRedis:
		rdb := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatalf(`this test needs Redis at %s ($EXACTLYONCE_REDIS_ADDR, by default 127.0.0.1:6379), and could not reach it: %v
To start one: redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no`, cfg.RedisAddr, err)
		}
	case storeMySQL:
		open, drop, err := openMySQL(ctx, cfg)
		if err == nil {
			_, err = open(ctx)
			drop()
		}
		if err != nil {
			t.Fatalf(`this test needs MySQL or MariaDB at %s ($EXACTLYONCE_MYSQL_DSN, by default root@tcp(127.0.0.1:3306)/test), and could not use it: %v
To start MariaDB: start-stop-daemon --start --oknodo --background --exec "$(command -v mariadbd)"`, cfg.MySQLDSN, err)
		}
	}
}

// requirePostgres fails the test unless the database at dsn answers.
func requirePostgres(t *testing.T, ctx context.Context, dsn string) {
	t.Helper()
	if err := pingDatabase(ctx, dsn); err != nil {
		t.Fatalf(`this test needs PostgreSQL, and could not reach it: %v

It connects to $EXACTLYONCE_PG_DSN, or by default to
    postgres://postgres@127.0.0.1:5432/test?sslmode=disable
a server on 127.0.0.1:5432 with trust authentication and a database "test".
To start one on Debian or Ubuntu (pg_lsclusters lists the versions):
    pg_ctlcluster <version> main start
    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE test'`, err)
	}
}

// pingDatabase checks that the database at dsn answers.
func pingDatabase(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}
