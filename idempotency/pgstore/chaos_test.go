package pgstore_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pgServer is a PostgreSQL server a test started, with a data directory and
// port of its own (the machine's server is never touched).
type pgServer struct {
	bin, data, dir string
	port           int
	cred           *syscall.Credential // the server's user, when the test runs as root
	cmd            *exec.Cmd
}

// pgBinDir finds the directory of initdb and postgres: on PATH, or where
// Debian installs them.
func pgBinDir(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) > 0 {
		return filepath.Dir(m[len(m)-1])
	}
	t.Fatal("the chaos test starts a PostgreSQL server itself, and needs initdb and postgres " +
		"(on PATH, or in /usr/lib/postgresql/<version>/bin)")
	return ""
}

// startPostgres makes a new cluster with initdb (trust authentication) and
// starts postgres on it, durable as by default (fsync on). PostgreSQL
// refuses to run as root: a root test runs it as the user postgres.
func startPostgres(t *testing.T) *pgServer {
	t.Helper()
	s := &pgServer{bin: pgBinDir(t)}
	dir, err := os.MkdirTemp("", "pgstore-chaos-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s.dir, s.data = dir, filepath.Join(dir, "data")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root, the chaos test runs PostgreSQL as the user postgres")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	initdb := exec.Command(filepath.Join(s.bin, "initdb"), "-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	out, err := initdb.CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.port = ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	s.start(t)
	t.Cleanup(func() { s.kill(t) })
	return s
}

func (s *pgServer) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// start starts the server and waits until it answers (a real condition,
// bounded): after a kill, once it recovered from its write-ahead log.
func (s *pgServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data, "-p", strconv.Itoa(s.port),
		"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "shared_buffers=16MB", "-c", "max_connections=60")
	// Its own process group: the kill takes the postmaster and every backend
	// at once, as a crash of the machine would.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	logFile, err := os.Create(filepath.Join(s.dir, "server.log"))
	require.NoError(t, err)
	defer logFile.Close()
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	require.NoError(t, s.cmd.Start())
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		pool, err := pgxpool.New(ctx, s.dsn())
		if err == nil {
			err = pool.Ping(ctx)
			pool.Close()
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			t.Fatalf("postgres on port %d did not answer within 60s: %v\n%s", s.port, err, log)
		}
		<-tick.C
	}
}

// kill ends the server and its backends with SIGKILL and waits for the
// postmaster to be gone.
func (s *pgServer) kill(t *testing.T) {
	t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// PostgreSQL is killed with SIGKILL mid-run (postmaster and backends at
// once) and restarted: it recovers every committed write from its log, so
// no key runs twice, none is left in progress, and the clients' retries
// carry nearly every request through the outage.
func TestChaosKillPostgreSQL(t *testing.T) {
	t.Parallel()
	srv := startPostgres(t)
	admin := newPoolFrom(t, mustParse(t, srv.dsn()))
	require.NoError(t, pgstore.Migrate(context.Background(), admin, "chaos"))
	admin.Close()
	res := storetest.RunChaos(t, storetest.ChaosConfig{
		Open: func(t *testing.T) idempotency.Store {
			cfg := mustParse(t, srv.dsn())
			cfg.MaxConns = 8
			s, err := pgstore.New(newPoolFrom(t, cfg), pgstore.WithSchema("chaos"))
			require.NoError(t, err)
			return s
		},
		Kill:    srv.kill,
		Restart: srv.start,
	})
	t.Logf("PostgreSQL: %v", res)
	assert.Zero(t, res.Duplicates, "duplicates")
	assert.Zero(t, res.Inconsistent, "keys answered two ways")
	assert.Zero(t, res.Stuck, "keys stuck in progress")
	assert.GreaterOrEqual(t, res.Succeeded*100, res.Requests*99, "succeeded")
}

func mustParse(t *testing.T, dsn string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	return cfg
}
