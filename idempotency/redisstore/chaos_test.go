package redisstore_test

import (
	"context"
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
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// redisServer is a redis-server a test started, on a port of its own.
type redisServer struct {
	args []string
	dir  string
	addr string
	cmd  *exec.Cmd
}

// startRedisServer starts redis-server in a new directory: with an
// append-only file synced on every write (persist), or with no persistence
// at all.
func startRedisServer(t *testing.T, persist bool) *redisServer {
	t.Helper()
	if persist {
		return startRedisServerWith(t, "--appendonly", "yes", "--appendfsync", "always")
	}
	return startRedisServerWith(t, "--appendonly", "no")
}

// startRedisServerWith starts redis-server in a new directory with extra
// settings.
func startRedisServerWith(t *testing.T, extra ...string) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("this test starts redis-server itself, and there is none on PATH: %v", err)
	}
	dir := t.TempDir()
	port := freePort(t)
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}, extra...)
	s := &redisServer{args: args, dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	s.start(t)
	t.Cleanup(func() { s.kill(t) })
	return s
}

func (s *redisServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command("redis-server", s.args...)
	require.NoError(t, s.cmd.Start())
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	// Wait for the server to answer (a real condition, bounded), loading
	// its append-only file first when it has one.
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			t.Fatalf("redis-server on %s did not answer within 30s:\n%s", s.addr, log)
		}
		<-tick.C
	}
}

// kill ends the server with SIGKILL and waits for it to be gone.
func (s *redisServer) kill(t *testing.T) {
	t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// freePort returns a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// chaosConfig runs three instances on srv, killing it with SIGKILL once a
// third of the requests were sent and starting it again at once.
func chaosConfig(srv *redisServer) storetest.ChaosConfig {
	return storetest.ChaosConfig{
		Open: func(t *testing.T) idempotency.Store {
			rdb := redis.NewClient(&redis.Options{Addr: srv.addr})
			t.Cleanup(func() { _ = rdb.Close() })
			s, err := redisstore.New(rdb, redisstore.WithPrefix("chaos"))
			require.NoError(t, err)
			return s
		},
		Kill:    srv.kill,
		Restart: srv.start,
	}
}

// Redis with an append-only file synced on every write is killed with
// SIGKILL mid-run and restarted: nothing it acknowledged is lost, so no key
// runs twice, none is left in progress, and the clients' retries carry
// nearly every request through the outage.
func TestChaosKillWithAppendOnlyFile(t *testing.T) {
	t.Parallel()
	res := storetest.RunChaos(t, chaosConfig(startRedisServer(t, true)))
	t.Logf("appendonly yes, appendfsync always: %v", res)
	assert.Zero(t, res.Duplicates, "duplicates")
	assert.Zero(t, res.Inconsistent, "keys answered two ways")
	assert.Zero(t, res.Stuck, "keys stuck in progress")
	assert.GreaterOrEqual(t, res.Succeeded*100, res.Requests*99, "succeeded")
}

// Redis without persistence is killed mid-run and restarted empty: every
// record is lost, so keys completed before the restart run again when their
// clients send them again. That is the cost the package documentation
// states: the test shows it, and that nothing else breaks (no key stuck,
// the requests still succeed).
func TestChaosKillWithoutPersistence(t *testing.T) {
	t.Parallel()
	res := storetest.RunChaos(t, chaosConfig(startRedisServer(t, false)))
	t.Logf("no persistence: %v", res)
	assert.Positive(t, res.Duplicates, "a restart without persistence forgets the keys claimed before it")
	assert.Zero(t, res.Stuck, "keys stuck in progress")
	assert.GreaterOrEqual(t, res.Succeeded*100, res.Requests*99, "succeeded")
}
