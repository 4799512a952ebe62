package natsconsumer_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// natsServer is a nats-server with JetStream of the test's own: its own
// port and store directory, under the test's temporary directory.
type natsServer struct {
	t      *testing.T
	bin    string
	port   int
	store  string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startNATSServer starts a server of the test's own, ended at the end of
// the test.
func startNATSServer(t *testing.T) *natsServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Fatalf("this test starts a nats-server of its own and needs nats-server on the PATH (Debian: apt-get install nats-server): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &natsServer{t: t, bin: bin, port: port, store: t.TempDir()}
	t.Cleanup(s.kill)
	s.start()
	return s
}

// url is the server's URL.
func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// start starts the server on its store directory and waits until it says
// it is ready.
func (s *natsServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-js", "-sd", s.store)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	ready := make(chan struct{})
	var log strings.Builder
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if !said {
				log.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "Server is ready") {
					said = true
					close(ready)
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		if !said {
			close(ready)
		}
		close(exited)
	}(s.cmd, s.exited)
	<-ready
	select {
	case <-s.exited:
		s.t.Fatalf("nats-server ended at its start:\n%s", log.String())
	default:
	}
}

// kill kills the server (SIGKILL), as a crash would, and waits for its end.
func (s *natsServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}
