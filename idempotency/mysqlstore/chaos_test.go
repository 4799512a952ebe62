package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mariadbServer is a MariaDB server a test started, with a data directory,
// port and socket of its own.
type mariadbServer struct {
	dir  string
	args []string
	cfg  *mysql.Config
	cmd  *exec.Cmd
}

// mariadbd is the server's command, found on PATH.
const mariadbd = "mariadbd"

// startMariaDB makes a new data directory with mariadb-install-db (root
// with no password) and starts mariadbd on it, durable as by default
// (innodb_flush_log_at_trx_commit=1).
func startMariaDB(t *testing.T) *mariadbServer {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", mariadbd} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("the chaos test starts a MariaDB server itself, and needs %s: %v", bin, err)
		}
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	require.NoError(t, err, "mariadb-install-db: %s", out)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	s := &mariadbServer{dir: dir, args: []string{"--no-defaults", "--datadir=" + data, "--user=root",
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--skip-name-resolve",
		"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(dir, "error.log"), "--innodb-buffer-pool-size=32M"}}
	s.cfg = mysql.NewConfig()
	s.cfg.User, s.cfg.Net, s.cfg.Addr = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", port)
	s.start(t)
	t.Cleanup(func() { s.kill(t) })
	db := s.open(t)
	_, err = db.Exec("CREATE DATABASE chaos")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	s.cfg.DBName = "chaos"
	return s
}

func (s *mariadbServer) open(t *testing.T) *sql.DB {
	t.Helper()
	connector, err := mysql.NewConnector(s.cfg)
	require.NoError(t, err)
	return sql.OpenDB(connector)
}

// start starts the server and waits until it answers (a real condition,
// bounded): after a kill, once InnoDB recovered from its log.
func (s *mariadbServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(mariadbd, s.args...)
	require.NoError(t, s.cmd.Start())
	db := s.open(t)
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for db.PingContext(context.Background()) != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
			t.Fatalf("mariadbd on %s did not answer within 60s:\n%s", s.cfg.Addr, log)
		}
		<-tick.C
	}
}

// kill ends the server with SIGKILL and waits for it to be gone.
func (s *mariadbServer) kill(t *testing.T) {
	t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// MariaDB is killed with SIGKILL mid-run and restarted: InnoDB recovers
// every committed write from its log, so no key runs twice, none is left in
// progress, and the clients' retries carry nearly every request through the
// outage.
func TestChaosKillMariaDB(t *testing.T) {
	t.Parallel()
	srv := startMariaDB(t)
	admin, err := mysqlstore.Open(srv.cfg)
	require.NoError(t, err)
	require.NoError(t, mysqlstore.Migrate(context.Background(), admin.DB(), mysqlstore.DefaultTablePrefix))
	require.NoError(t, admin.Close())
	res := storetest.RunChaos(t, storetest.ChaosConfig{
		Open: func(t *testing.T) idempotency.Store {
			s, err := mysqlstore.Open(srv.cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Kill:    srv.kill,
		Restart: srv.start,
	})
	t.Logf("MariaDB: %v", res)
	assert.Zero(t, res.Duplicates, "duplicates")
	assert.Zero(t, res.Inconsistent, "keys answered two ways")
	assert.Zero(t, res.Stuck, "keys stuck in progress")
	assert.GreaterOrEqual(t, res.Succeeded*100, res.Requests*99, "succeeded")
}
