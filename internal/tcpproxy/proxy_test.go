package tcpproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/exactlyonce/retry/internal/tcpproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a server that echoes each line, until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// roundTrip sends line over c and reads it back.
func roundTrip(c net.Conn, r *bufio.Reader, line string) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := r.ReadString('\n')
	if len(got) > 0 {
		got = got[:len(got)-1]
	}
	return got, err
}

func TestProxyForwardsHoldsAndCuts(t *testing.T) {
	p, err := tcpproxy.New(echo(t))
	require.NoError(t, err)
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	got, err := roundTrip(c, r, "one")
	require.NoError(t, err)
	assert.Equal(t, "one", got)
	assert.Equal(t, 1, p.Accepted())

	p.Hold()
	_, err = c.Write([]byte("two\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.HeldBytes() == 4 }, 10*time.Second, time.Millisecond,
		"the proxy holds the line sent")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err = r.ReadString('\n')
	require.Error(t, err, "nothing comes back while the proxy holds")
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	p.Release()
	got, err = r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "two\n", got, "what was held is delivered on release")

	assert.Equal(t, 1, p.Cut())
	_, err = r.ReadString('\n')
	require.Error(t, err, "the client's connection is closed by the cut")
	assert.Equal(t, 1, p.Cuts())

	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	got, err = roundTrip(c2, bufio.NewReader(c2), "three")
	require.NoError(t, err)
	assert.Equal(t, "three", got, "a new connection is forwarded after a cut")
}

func TestProxyRefuses(t *testing.T) {
	p, err := tcpproxy.New(echo(t))
	require.NoError(t, err)
	defer p.Close()
	p.Refuse(true)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = roundTrip(c, bufio.NewReader(c), "x")
	require.Error(t, err, "a refused connection is closed")
	assert.Equal(t, 1, p.Refused())
	p.Refuse(false)
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	got, err := roundTrip(c2, bufio.NewReader(c2), "y")
	require.NoError(t, err)
	assert.Equal(t, "y", got)
}
