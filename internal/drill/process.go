package drill

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Lines a drill's child process prints on its stdout: LineRunning once
// its consumer runs, LineOutage once it saw its dependency down,
// LineStopped with its stats once Run returned.
const (
	LineRunning = "running"
	LineOutage  = "outage"
	LineStopped = "stopped"
)

// Process is a child process of a drill and the lines it printed.
type Process struct {
	cmd   *exec.Cmd
	lines chan string
	// Last is the last line read; Dir a directory of the process's own
	// (for its log).
	Last, Dir string
}

// StartProcess starts the test binary again as a drill child, its
// environment that of the test with env(Dir) added, killed at the end of
// the test if it still runs, and waits for it to print LineRunning.
func StartProcess(t *testing.T, env func(dir string) []string) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	dir := t.TempDir()
	cmd.Env = append(os.Environ(), env(dir)...)
	// Under -race a process sleeps a second at its exit unless told not to.
	cmd.Env = append(cmd.Env, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &Process{cmd: cmd, lines: make(chan string, 16), Dir: dir}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			p.Kill()
		}
	})
	p.Await(t, LineRunning)
	return p
}

// Await waits for the child to print a line starting with prefix.
func (p *Process) Await(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the drill child ended without printing %q", prefix)
			}
			p.Last = l
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("the drill child did not print %q within a minute", prefix)
		}
	}
}

// Kill kills the child with SIGKILL and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// StopAll sends SIGTERM to every child at once, and returns how long each
// took to exit, which it must do cleanly having printed LineStopped.
func StopAll(t *testing.T, children []*Process) []time.Duration {
	t.Helper()
	took := make([]time.Duration, len(children))
	stopped := make([]bool, len(children))
	done := make(chan struct{}, len(children))
	for i, c := range children {
		go func() {
			defer func() { done <- struct{}{} }()
			begin := time.Now()
			if c.cmd.Process.Signal(syscall.SIGTERM) != nil {
				return
			}
			for l := range c.lines { // until its stdout closes: it exited
				c.Last = l
				stopped[i] = stopped[i] || strings.HasPrefix(l, LineStopped)
			}
			_ = c.cmd.Wait()
			took[i] = time.Since(begin)
		}()
	}
	for range children {
		<-done
	}
	for i, c := range children {
		require.True(t, stopped[i] && c.cmd.ProcessState != nil && c.cmd.ProcessState.Success(),
			"child %d exited with %v, its last line %q", i, c.cmd.ProcessState, c.Last)
	}
	return took
}

// EffectCount is what a drill's effects table holds.
type EffectCount struct {
	All, Distinct int
	Doubled       []string // keys with more than one effect
	Keys          map[string]bool
}

// CountEffects reads the effects table of schema (see Handler).
func CountEffects(t testing.TB, pool *pgxpool.Pool, schema string) EffectCount {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT key, count(*) FROM "+pgx.Identifier{schema, "effects"}.Sanitize()+" GROUP BY key")
	require.NoError(t, err)
	defer rows.Close()
	n := EffectCount{Keys: make(map[string]bool)}
	for rows.Next() {
		var (
			key string
			k   int
		)
		require.NoError(t, rows.Scan(&key, &k))
		n.All += k
		n.Distinct++
		n.Keys[key] = true
		if k > 1 {
			n.Doubled = append(n.Doubled, key)
		}
	}
	require.NoError(t, rows.Err())
	return n
}

// Await is how AwaitEffects watches a drill's end.
type Await struct {
	Consumer *consumer.Consumer
	Store    idempotency.Store
	Pool     *pgxpool.Pool
	Schema   string
	// Keys are the drill's messages.
	Keys []string
	// Broker says what the broker holds, for a failure's report; Settled
	// whether it holds nothing more.
	Broker  func() string
	Settled func() bool
	// Logs are glob patterns of the consumers' logs, whose lines that name
	// a message without an effect go in a failure's report.
	Logs []string
}

// AwaitEffects waits until every message has its effect and the broker is
// settled (nobody runs a parked message meanwhile), and returns how many
// messages are parked then; after two minutes it fails the test with what
// became of the messages without an effect.
func AwaitEffects(t *testing.T, a Await) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	parked := 0
	for range tick.C {
		recs, err := a.Consumer.ListParked(context.Background(), "", 0)
		require.NoError(t, err)
		parked = len(recs)
		n := CountEffects(t, a.Pool, a.Schema)
		if n.Distinct == len(a.Keys) && a.Settled() {
			return parked
		}
		if time.Now().Before(deadline) {
			continue
		}
		var missing []string
		for _, key := range a.Keys {
			if !n.Keys[key] {
				missing = append(missing, key)
			}
		}
		report := fmt.Sprintf("%d effects for %d of %d messages; %sthe new consumer %+v; without an effect (%d):",
			n.All, n.Distinct, len(a.Keys), a.Broker(), a.Consumer.Stats(), len(missing))
		for _, key := range missing[:min(len(missing), 10)] {
			rec, err := a.Store.Get(context.Background(), a.Consumer.Caller(), key)
			report += fmt.Sprintf("\n  %s: %+v %v", key, rec, err) + logLines(a.Logs, key)
		}
		t.Fatal(report)
	}
	return parked
}

// logLines returns the lines of the logs (glob patterns) that name key.
func logLines(patterns []string, key string) string {
	var out string
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "key="+key+" ") {
					out += "\n    " + filepath.Base(f) + ": " + l
				}
			}
		}
	}
	return out
}
