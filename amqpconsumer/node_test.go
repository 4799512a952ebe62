package amqpconsumer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// rabbitNode is a RabbitMQ node of the test's own: its own node name,
// ports and data directory, under the test's temporary directory.
type rabbitNode struct {
	t          *testing.T
	name, dir  string
	port       int
	env        []string
	server, ct string // the rabbitmq-server and rabbitmqctl commands
	cmd        *exec.Cmd
	exited     chan struct{}
	out        *bytes.Buffer
}

// rabbitBin is where Debian's package keeps the commands that run a node
// as the calling user (its packaged wrappers switch to the rabbitmq user).
const rabbitBin = "/usr/lib/rabbitmq/bin"

// rabbitCommand finds one of RabbitMQ's commands.
func rabbitCommand(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("EXACTLYONCE_RABBITMQ_BIN"); dir != "" {
		return filepath.Join(dir, name)
	}
	if p := filepath.Join(rabbitBin, name); fileExists(p) {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("this test starts a RabbitMQ node of its own and needs %s (Debian: apt-get install rabbitmq-server; or set EXACTLYONCE_RABBITMQ_BIN): %v", name, err)
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startRabbitNode starts a node of the test's own, stopped at the end of
// the test.
func startRabbitNode(t *testing.T) *rabbitNode {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := &rabbitNode{
		t:      t,
		name:   "t" + hex.EncodeToString(b) + "@localhost",
		dir:    t.TempDir(),
		port:   freePort(t),
		server: rabbitCommand(t, "rabbitmq-server"),
		ct:     rabbitCommand(t, "rabbitmqctl"),
	}
	for _, d := range []string{"mnesia", "log", "home"} {
		if err := os.Mkdir(filepath.Join(n.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"enabled_plugins":   "[].\n", // no management plugin, no plugin at all
		"rabbitmq.conf":     fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users = none\n", n.port),
		"rabbitmq-env.conf": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.env = append(os.Environ(),
		"HOME="+filepath.Join(n.dir, "home"), // its own Erlang cookie
		"RABBITMQ_NODENAME="+n.name,
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", n.port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", freePort(t)),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(n.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(n.dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(n.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(n.dir, "enabled_plugins"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(n.dir, "rabbitmq-env.conf"),
		"RABBITMQ_PID_FILE="+n.pidFile(),
		"ERL_EPMD_ADDRESS=127.0.0.1",
	)
	t.Cleanup(n.end)
	n.start()
	return n
}

func (n *rabbitNode) pidFile() string { return filepath.Join(n.dir, "pid") }

// url is the node's AMQP URL.
func (n *rabbitNode) url() string {
	return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.port)
}

// start starts the node on its data directory and waits until it serves.
func (n *rabbitNode) start() {
	n.t.Helper()
	_ = os.Remove(n.pidFile())
	n.out = new(bytes.Buffer)
	n.cmd = exec.Command(n.server)
	n.cmd.Env = n.env
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		n.t.Fatalf("start rabbitmq-server: %v", err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(n.cmd, n.exited)
	if out, err := n.ctl("wait", n.pidFile(), "--timeout", "120"); err != nil {
		n.t.Fatalf("RabbitMQ node %s did not start: %v\n%s\n%s", n.name, err, out, n.out)
	}
}

// stop stops the node (rabbitmqctl stop) and waits for its process to end.
func (n *rabbitNode) stop() {
	n.t.Helper()
	if out, err := n.ctl("stop", n.pidFile()); err != nil {
		n.t.Fatalf("stop RabbitMQ node %s: %v\n%s", n.name, err, out)
	}
	<-n.exited
	n.cmd = nil
}

// end stops the node if it runs, killing it if it will not stop.
func (n *rabbitNode) end() {
	if n.cmd == nil {
		return
	}
	if _, err := n.ctl("stop", n.pidFile()); err != nil {
		_ = n.cmd.Process.Kill()
	}
	<-n.exited
	n.cmd = nil
}

// ctl runs rabbitmqctl against the node.
func (n *rabbitNode) ctl(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.ct, append([]string{"-n", n.name}, args...)...)
	cmd.Env = n.env
	return cmd.CombinedOutput()
}
