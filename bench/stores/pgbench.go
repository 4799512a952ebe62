package stores

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementTracer keeps the SQL of the statements a pool runs.
type statementTracer struct {
	mu  sync.Mutex
	sql []string
}

func (t *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	t.sql = append(t.sql, data.SQL)
	t.mu.Unlock()
	return ctx
}

func (t *statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// pgbenchScript returns a pgbench script that runs the store's own claim
// and complete statements, taken from a claim and a completion made through
// pgstore on schema (so they never drift from the store's): a new key per
// transaction, the claim's attempt and generation carried to the
// completion with \gset.
func (sv Servers) pgbenchScript(ctx context.Context, schema string) (string, error) {
	cfg, err := pgxpool.ParseConfig(sv.PostgresDSN)
	if err != nil {
		return "", err
	}
	tracer := new(statementTracer)
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		return "", err
	}
	c, err := s.Claim(ctx, idempotency.ClaimRequest{Key: "capture", Fingerprint: limitFingerprint,
		Lease: defaultLease, TTL: defaultTTL})
	if err != nil {
		return "", err
	}
	tracer.mu.Lock()
	claimSQL := tracer.sql[len(tracer.sql)-1]
	tracer.mu.Unlock()
	if err := s.Complete(ctx, c.Record.Fence(), limitResponse); err != nil {
		return "", err
	}
	tracer.mu.Lock()
	completeSQL := tracer.sql[len(tracer.sql)-1]
	tracer.mu.Unlock()
	bytea := func(b []byte) string { return fmt.Sprintf(`'\x%x'::bytea`, b) }
	key := `convert_to(:client_id || '-' || :k, 'UTF8')`
	// The statements' parameters (see pgstore's queries): claim caller,
	// key, fingerprint, lease and TTL in microseconds, resume, time shift,
	// the recovery point a new record starts with; complete caller, key,
	// attempt, response, generation, time shift.
	claim, err := bind(claimSQL, bytea(nil), key, bytea([]byte(limitFingerprint)),
		strconv.FormatInt(defaultLease.Microseconds(), 10),
		strconv.FormatInt(defaultTTL.Microseconds(), 10), "NULL::bytea", "0", "NULL::bytea")
	if err != nil {
		return "", fmt.Errorf("the claim statement: %w", err)
	}
	// \gset names a variable after each column: the claim's first
	// (whether it claimed) has none.
	named := strings.Replace(claim, "SELECT true,", "SELECT true AS claimed,", 1)
	if named == claim {
		return "", errors.New("the claim statement no longer starts its result with SELECT true")
	}
	claim = named
	complete, err := bind(completeSQL, bytea(nil), key, ":attempt", bytea(limitResponse), ":generation", "0")
	if err != nil {
		return "", fmt.Errorf("the complete statement: %w", err)
	}
	return fmt.Sprintf("\\set k random(1, 1000000000000)\n%s\n\\gset\n%s;\n", oneLine(claim), oneLine(complete)), nil
}

var param = regexp.MustCompile(`\$([0-9]+)`)

// bind replaces $1, $2, ... in sql with args, and checks they all are used.
func bind(sql string, args ...string) (string, error) {
	var bad error
	out := param.ReplaceAllStringFunc(sql, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		if n < 1 || n > len(args) {
			bad = fmt.Errorf("parameter %s of %d", p, len(args))
			return p
		}
		return args[n-1]
	})
	return out, bad
}

// oneLine puts a statement on one line, as pgbench reads it (a \gset on
// the next line ends the statement before it).
func oneLine(sql string) string {
	return strings.Join(strings.Fields(sql), " ")
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench runs script with clients at once for d and returns its
// transactions (claim+complete pairs) per second.
func (sv Servers) pgbench(ctx context.Context, script string, clients int, d time.Duration) (float64, error) {
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		return 0, errors.New("pgbench is not installed")
	}
	dir, err := os.MkdirTemp("", "pgbench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "claim-complete.sql")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return 0, err
	}
	cfg, err := pgx.ParseConfig(sv.PostgresDSN)
	if err != nil {
		return 0, err
	}
	secs := max(1, int(d.Round(time.Second)/time.Second))
	cmd := exec.CommandContext(ctx, bin, "-n", "-M", "prepared", "-f", path, "-c", strconv.Itoa(clients),
		"-j", "2", "-T", strconv.Itoa(secs), "-h", cfg.Host, "-p", strconv.Itoa(int(cfg.Port)), "-U", cfg.User, cfg.Database)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+cfg.Password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w: %s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench said no tps: %s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, err
	}
	return tps, nil
}
