package retry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// stallGap is the least time a body being drained may send nothing, once
// the wait before the retry is over, before the retry goes without it. The
// gap grows with how late the waiting goroutine's own timers run (see
// drainer.settle): a machine too busy to run a reader on time does not make
// its body look stalled.
const stallGap = 5 * time.Millisecond

// drain reads up to drainLimit bytes of a response body that will not be
// used and closes it, so its connection goes back to the pool; a body not
// over within bound is closed where it stands.
func drain(resp *http.Response, clk clock.Clock, bound time.Duration) {
	if resp == nil || resp.Body == nil {
		return
	}
	if bound <= 0 {
		resp.Body.Close()
		return
	}
	body := &closeOnce{ReadCloser: resp.Body}
	t := afterFunc(clk, bound, func() { body.Close() })
	io.CopyN(io.Discard, body, drainLimit)
	t.Stop()
	body.Close()
}

// drainer reads the body of a response that is about to be retried, on a
// goroutine of its own, so that its connection goes back to the pool and,
// when kept, its bytes can still be handed back later. The retry waits for
// it only while it keeps arriving (see settle); a body still arriving when
// the retry goes is read on meanwhile, up to drainLimit and at most until
// bound, or until stop (the round trip is over), then closed, and only then
// is its attempt's context ended.
type drainer struct {
	body    closeOnce
	clk     clock.Clock
	start   time.Time
	last    atomic.Int64   // when bytes last came, or a read began, since start
	reading atomic.Bool    // a read of the body is under way
	resp    *http.Response // the response, when its bytes are kept
	read    []byte         // the bytes read, when kept
	whole   bool           // the body ended within drainLimit
	done    chan struct{}
	timer   stopper // closes the body at its bound
	release func()  // ends the attempt's context once reading is over
}

// startDrain starts reading resp's body on a goroutine of its own, keeping
// its bytes when keep (and they can fit in drainLimit); the body is closed
// at bound at the latest, and release is called once reading is over.
func startDrain(resp *http.Response, clk clock.Clock, bound time.Duration, keep bool, release func()) *drainer {
	body := resp.Body
	if body == nil {
		body = http.NoBody
	}
	d := &drainer{body: closeOnce{ReadCloser: body}, clk: clk, start: clk.Now(), done: make(chan struct{}), release: release}
	if keep && resp.ContentLength <= drainLimit {
		d.resp = resp
	}
	d.timer = afterFunc(clk, max(bound, 0), func() { d.body.Close() })
	go d.run()
	return d
}

// run reads the body to its end, to drainLimit, or until the bound closes
// it, then closes it and ends the attempt's context.
func (d *drainer) run() {
	if d.resp != nil {
		b, err := io.ReadAll(io.LimitReader(d, drainLimit+1))
		d.read, d.whole = b, err == nil && len(b) <= drainLimit
	} else {
		io.CopyN(io.Discard, d, drainLimit)
	}
	d.timer.Stop()
	d.body.Close()
	d.release()
	close(d.done)
}

// Read reads from the body and notes when a read began and when bytes
// came: the body is silent only while a read waits for it.
func (d *drainer) Read(p []byte) (int, error) {
	d.last.Store(int64(d.clk.Since(d.start)))
	d.reading.Store(true)
	n, err := d.body.Read(p)
	d.reading.Store(false)
	if n > 0 {
		d.last.Store(int64(d.clk.Since(d.start)))
	}
	return n, err
}

// settle waits wait (the wait before the retry), and past it while the
// body keeps arriving: it returns once the body is read, once it has sent
// nothing for the stall gap, or when ctx ends. The body is silent only
// while a read of it waits: a reader not yet started, or between two reads,
// is one the machine has not run yet, not a stalled body. The gap is
// stallGap plus twice the most this goroutine's own timers ran late during
// the wait, for the same reason.
func (d *drainer) settle(ctx context.Context, wait time.Duration) {
	var late time.Duration // the most a timer of this wait ran late
	fired := make(chan struct{}, 1)
	arm := func(after time.Duration) (stopper, time.Time) {
		after = max(after, 0)
		return afterFunc(d.clk, after, func() { fired <- struct{}{} }), d.clk.Now().Add(after)
	}
	t, due := arm(wait)
	defer func() { t.Stop() }()
	for {
		select {
		case <-d.done:
			return
		case <-ctx.Done():
			return
		case <-fired:
		}
		now := d.clk.Now()
		late = max(late, now.Sub(due))
		gap := stallGap + 2*late
		quiet := time.Duration(0) // a reader not waiting for the body is one the machine is late to run
		if d.reading.Load() {
			quiet = now.Sub(d.start) - time.Duration(d.last.Load())
		}
		if quiet >= gap {
			return // stalled: the retry goes, the body is read on meanwhile
		}
		t, due = arm(gap - quiet)
	}
}

// stop closes the body where it stands, if it is still being read, and
// waits for the reading to end.
func (d *drainer) stop() {
	d.body.Close()
	<-d.done
}

// response waits for the body as settle does (for nothing more than
// while it keeps arriving) and returns a copy of the response whose body is
// the bytes read: nil when they were not kept or the body did not end
// within drainLimit, so that it cannot be had whole.
func (d *drainer) response(ctx context.Context) *http.Response {
	if d.resp == nil {
		return nil
	}
	d.settle(ctx, 0)
	select {
	case <-d.done:
	default:
		return nil
	}
	if !d.whole {
		return nil
	}
	kept := *d.resp
	kept.Body = io.NopCloser(bytes.NewReader(d.read))
	return &kept
}
