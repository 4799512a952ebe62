package retry_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// lateClock is a mock clock on which time can pass without its timers
// firing: after Lag, Now runs ahead of the time the timers fire at, as on a
// machine too busy to run them on time.
type lateClock struct {
	*clock.Mock
	mu  sync.Mutex
	lag time.Duration
}

func newLateClock() *lateClock { return &lateClock{Mock: clock.NewMock()} }

// Lag lets d pass without any timer firing.
func (c *lateClock) Lag(d time.Duration) {
	c.mu.Lock()
	c.lag += d
	c.mu.Unlock()
}

func (c *lateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Mock.Now().Add(c.lag)
}

func (c *lateClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// A body that keeps coming is not taken as stalled because the machine was
// too busy to run its reader on time: the wait before the retry ended 50 ms
// late (its timer, like the reader, was not run), so the body's silence
// says nothing of the server. It is read whole before the retry, and its
// connection is reused. The stall rule used to close it at once, 5 ms
// after its last bytes by the clock, however late the check ran.
func TestABodyIsNotTakenAsStalledWhileTheMachineIsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newLateClock()
		more := make(chan struct{})
		var read atomic.Int64
		var readAtRetry int64
		attempts := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			attempts++
			if attempts > 1 {
				readAtRetry = read.Load()
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			}
			pr, pw := io.Pipe()
			go func() {
				pw.Write(make([]byte, 512))
				<-more // the rest comes once the reader runs again
				pw.Write(make([]byte, 3584))
				pw.Close()
			}()
			return &http.Response{StatusCode: 503, Header: http.Header{}, ContentLength: 4096,
				Body: readCounter{pr, &read}, Request: r}, nil
		})
		tr := retry.NewTransport(base, retry.WithClock(clk), retry.WithBackoff(backoff.Constant(10*time.Millisecond)))
		done := make(chan error, 1)
		go func() {
			resp, err := (&http.Client{Transport: tr}).Do(mustRequest(context.Background(), "http://dep.test/"))
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		synctest.Wait() // the first 512 bytes are read; the wait before the retry runs
		require.Equal(t, int64(512), read.Load())
		clk.Lag(50 * time.Millisecond) // the machine ran nothing for 50 ms
		clk.Add(10 * time.Millisecond) // then the wait's timer fires, late
		synctest.Wait()
		close(more)
		require.NoError(t, <-done)
		assert.Equal(t, 2, attempts)
		assert.Equal(t, int64(4096), readAtRetry, "the body was read whole before the retry")
	})
}
