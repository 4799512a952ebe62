package retry

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// stallGap is how long a body being drained may send nothing, once the
// wait before the retry is over, before it is taken as stalled and closed
// where it stands: a body still arriving is read to its end (so its
// connection is reused), a stalled one never holds the retry back.
const stallGap = 5 * time.Millisecond

// drain reads up to drainLimit bytes of a response body that will not be
// used and closes it, so its connection goes back to the pool. It reads on
// past wait only while the body keeps arriving, and never past bound (see
// drainWatch).
func drain(resp *http.Response, clk clock.Clock, wait, bound time.Duration) {
	if resp == nil || resp.Body == nil {
		return
	}
	if bound <= 0 {
		resp.Body.Close()
		return
	}
	w := watchDrain(resp.Body, clk, wait, bound)
	io.CopyN(io.Discard, w, drainLimit)
	w.stop()
}

// keep drains a response that is about to be retried, as drain does, and
// returns a copy of it whose body is the bytes read, for handing back
// later: nil when the body did not end within drainLimit, or was closed
// where it stood, so that it cannot be had whole.
func keep(resp *http.Response, clk clock.Clock, wait, bound time.Duration) *http.Response {
	if resp.ContentLength > drainLimit || bound <= 0 {
		drain(resp, clk, wait, bound)
		return nil
	}
	var b []byte
	if resp.Body != nil {
		w := watchDrain(resp.Body, clk, wait, bound)
		read, err := io.ReadAll(io.LimitReader(w, drainLimit+1))
		w.stop()
		if err != nil || len(read) > drainLimit {
			return nil
		}
		b = read
	}
	kept := *resp
	kept.Body = io.NopCloser(bytes.NewReader(b))
	return &kept
}

// drainWatch reads a body being drained and closes it where it stands once
// the wait is over and it has sent nothing for stallGap, or at bound,
// whichever comes first. Its timer runs only while the body is read.
type drainWatch struct {
	body  closeOnce
	clk   clock.Clock
	start time.Time
	bound time.Duration
	last  atomic.Int64 // when a read last brought bytes, since start
	mu    sync.Mutex
	timer stopper
	done  bool
}

func watchDrain(body io.ReadCloser, clk clock.Clock, wait, bound time.Duration) *drainWatch {
	w := &drainWatch{body: closeOnce{ReadCloser: body}, clk: clk, start: clk.Now(), bound: bound}
	w.arm(max(min(wait, bound), 0))
	return w
}

// Read reads from the body and notes when bytes came.
func (w *drainWatch) Read(p []byte) (int, error) {
	n, err := w.body.Read(p)
	if n > 0 {
		w.last.Store(int64(w.clk.Since(w.start)))
	}
	return n, err
}

// arm sets the timer to check the body in d, unless reading is over.
func (w *drainWatch) arm(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.timer = afterFunc(w.clk, d, w.check)
	}
}

// check closes a body that stalled or reached the bound, and otherwise
// looks again when it would have stalled.
func (w *drainWatch) check() {
	now := w.clk.Since(w.start)
	stalled := time.Duration(w.last.Load()) + stallGap
	if now >= w.bound || stalled <= now {
		w.body.Close()
		return
	}
	w.arm(min(stalled, w.bound) - now)
}

// stop ends the watch and closes the body.
func (w *drainWatch) stop() {
	w.mu.Lock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.body.Close()
}
