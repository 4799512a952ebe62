package browser_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/chromedp/chromedp"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/opsui"
)

// updateScreenshot rewrites the screenshot the README shows.
var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite ../docs/screenshot.png")

const lease = 30 * time.Second

// newBrowser starts headless Chromium for the test and returns a context
// to run actions in; the browser ends with the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	// Debian's Chromium (apt-get install chromium).
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("Chromium is not installed (apt-get install -y chromium; .ci/run installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// No connection of the browser's own: the tests need only localhost.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1100, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Do starts the browser; a timeout on its context would
	// end the browser with it, so the bound is kept apart.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start Chromium at %s: %v", path, err)
		}
	case <-time.After(time.Minute):
		cancel()
		<-started
		t.Fatalf("Chromium at %s did not start within a minute", path)
	}
	return ctx
}

// run runs steps in the browser, within a bound.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one action that returns a value, within a bound.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// service is what a test serves: a Runner on the store, the page mounted
// on it, a dependency that can go down, and an attacker's page on another
// origin.
type service struct {
	store   idempotency.Store
	advance func(time.Duration)
	runner  *idempotency.Runner
	page    *httptest.Server
	evil    *httptest.Server
	base    string

	// The dependency: a backend answering 503 while down, and the
	// Transport of a client of it.
	down    atomic.Bool
	backend *httptest.Server
	client  *http.Client
	tr      *retry.Transport

	mu     sync.Mutex
	broken bool
}

func newService(t *testing.T, sc storeCase, pageClock clock.Clock) *service {
	s := &service{}
	s.store, s.advance = sc.open(t)
	s.runner = idempotency.NewRunner(s.store, idempotency.WithLease(lease))
	s.runner.Register("ledger", func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		if _, err := e.Step(ctx, "charge", func(context.Context, string) ([]byte, error) {
			return []byte(`{"charge":"ch_1","card_number":"4242424242424242"}`), nil
		}); err != nil {
			return nil, err
		}
		s.mu.Lock()
		broken := s.broken
		s.mu.Unlock()
		if broken {
			return nil, idempotency.Park(errors.New("ledger refused: Authorization: Bearer sk_live_abc123"))
		}
		return []byte("paid " + string(e.Input())), nil
	})
	s.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if s.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(s.backend.Close)
	budget := retry.NewBudget(0.1, 1, 10)
	s.tr = retry.NewTransport(http.DefaultTransport, retry.WithBackoff(backoff.Constant(5*time.Millisecond)), retry.WithBudget(budget))
	s.client = &http.Client{Transport: s.tr}
	t.Cleanup(s.tr.CloseIdleConnections)

	mux := http.NewServeMux()
	mux.Handle(opsui.DefaultPath+"/", opsui.New(opsui.Config{
		Runner:    s.runner,
		Authorize: func(*http.Request, opsui.Action) error { return nil },
		Clients:   []opsui.Client{opsui.TransportClient("payments", s.tr)},
		Consumers: []opsui.Consumer{{Name: "orders", Stats: func() consumer.Stats { return consumer.Stats{Executed: 41, Duplicates: 3, Parked: 1} }}},
		Clock:     pageClock,
	}))
	s.page = httptest.NewServer(mux)
	t.Cleanup(s.page.Close)
	s.base = s.page.URL + opsui.DefaultPath
	return s
}

// park runs the ledger work for key while it is broken: parked after its
// charge step.
func (s *service) park(t *testing.T, key string) {
	t.Helper()
	s.mu.Lock()
	s.broken = true
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.broken = false; s.mu.Unlock() }()
	_, err := s.runner.Do(context.Background(), idempotency.Request{Caller: "shop", Key: key, Work: "ledger", Input: []byte("7 EUR")}, nil)
	if !errors.Is(err, idempotency.ErrParked) {
		t.Fatalf("park %s: %v", key, err)
	}
}

// stall begins the ledger work for key and leaves it hanging; the store's
// clock then moves past its lease. The hung execution ends with the test.
func (s *service) stall(t *testing.T, key string) {
	t.Helper()
	started, hang, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.runner.Do(context.Background(), idempotency.Request{Caller: "shop", Key: key, Work: "ledger", Input: []byte("9 EUR")},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				if err := e.SaveStarted(ctx); err != nil {
					return nil, err
				}
				close(started)
				<-hang
				return nil, errors.New("crashed")
			})
	}()
	<-started
	t.Cleanup(func() { close(hang); <-done })
}

// call sends one request to the dependency, bounded.
func (s *service) call() {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.backend.URL, nil)
	if resp, err := s.client.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}

// dependencyState is the Transport's state of the backend.
func (s *service) dependencyState() string {
	for _, d := range s.tr.Dependencies() {
		if "http://"+d.Name == s.backend.URL {
			return d.State
		}
	}
	return ""
}

// takeDown fails the backend until the Transport holds it as down.
func (s *service) takeDown(t *testing.T) {
	t.Helper()
	s.down.Store(true)
	for range 50 {
		s.call()
		if s.dependencyState() == "down" {
			return
		}
	}
	t.Fatalf("the dependency is %q after 50 failed calls", s.dependencyState())
}

// bringUp mends the backend and calls it until the Transport holds it as up.
func (s *service) bringUp(t *testing.T) {
	t.Helper()
	s.down.Store(false)
	for range 50 {
		s.call()
		if s.dependencyState() == "up" {
			return
		}
	}
	t.Fatalf("the dependency is %q after 50 calls to a mended backend", s.dependencyState())
}

func (s *service) detailURL(key string) string {
	return s.base + "/execution?" + url.Values{"caller": {"shop"}, "key": {key}}.Encode()
}

func (s *service) record(t *testing.T, key string) (idempotency.Record, error) {
	t.Helper()
	return s.store.Get(context.Background(), "shop", key)
}

// TestOperatorPage opens the page in Chromium against every store while
// executions are parked and stalled: it lists them, shows one redacted,
// retries a parked one and resumes a stalled one with the page's buttons
// and sees them complete, refuses an attacker's cross-origin form, and
// shows a dependency go down and up.
func TestOperatorPage(t *testing.T) {
	browser := newBrowser(t)
	for _, sc := range storeCases {
		t.Run(sc.name, func(t *testing.T) {
			tab := browser
			s := newService(t, sc, nil)
			s.park(t, "order-1")
			s.park(t, "order-2")
			s.stall(t, "order-3")
			s.advance(lease + time.Second)

			// Parked, listed with the reason redacted.
			var reason string
			run(t, tab, "list parked",
				chromedp.Navigate(s.base+"/executions?state=parked"),
				chromedp.WaitVisible(css(`tr[data-key="order-1"]`)),
				chromedp.WaitVisible(css(`tr[data-key="order-2"]`)),
			)
			reason = value(t, tab, "reason", chromedp.Text(css(`tr[data-key="order-1"] .reason`)))
			if !strings.Contains(reason, "ledger refused") || !strings.Contains(reason, "[redacted]") || strings.Contains(reason, "sk_live") {
				t.Fatalf("the parked reason shows as %q", reason)
			}

			// The detail, redacted.
			var state, page string
			run(t, tab, "detail",
				chromedp.Navigate(s.detailURL("order-1")),
			)
			state = value(t, tab, "state", chromedp.Text(css(`#state`)))
			page = value(t, tab, "page", chromedp.OuterHTML(css(`html`)))
			if state != "parked" {
				t.Fatalf("order-1 shows as %q, want parked", state)
			}
			for _, secret := range []string{"4242424242424242", "sk_live_abc123", "7 EUR"} {
				if strings.Contains(page, secret) {
					t.Fatalf("the detail shows %q", secret)
				}
			}
			for _, want := range []string{"ch_1", "[redacted]", "charge", "ledger"} {
				if !strings.Contains(page, want) {
					t.Fatalf("the detail does not show %q", want)
				}
			}

			// An attacker's page on another origin posts the discard
			// form: refused, and order-2 stays parked.
			s.evil = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/execution/discard">
<input name="caller" value="shop"><input name="key" value="order-2"><button id="go">win a prize</button></form>`, s.base)
			}))
			defer s.evil.Close()
			var refusal string
			run(t, tab, "cross-origin post",
				chromedp.Navigate(s.evil.URL),
				chromedp.Click(css(`#go`)),
				chromedp.WaitVisible(css(`#problem`)),
			)
			refusal = value(t, tab, "refusal", chromedp.Text(css(`#problem`)))
			if !strings.Contains(refusal, "cross-origin") {
				t.Fatalf("the cross-origin post got %q", refusal)
			}
			if r, err := s.record(t, "order-2"); err != nil || r.Parked == "" {
				t.Fatalf("after the cross-origin post order-2 is %+v, %v", r, err)
			}

			// Retry the parked one with its button: it completes.
			run(t, tab, "retry",
				chromedp.Navigate(s.detailURL("order-1")),
				chromedp.Click(css(`#retry`)),
				chromedp.WaitVisible(css(`#flash`)),
			)
			state = value(t, tab, "state", chromedp.Text(css(`#state`)))
			if state != "completed" {
				t.Fatalf("after retry order-1 shows as %q", state)
			}
			if r, err := s.record(t, "order-1"); err != nil || r.State != idempotency.StateCompleted {
				t.Fatalf("after retry order-1 is %+v, %v", r, err)
			}

			// Stalled, listed; resume it with its button: it completes.
			run(t, tab, "resume",
				chromedp.Navigate(s.base+"/executions?state=stalled"),
				chromedp.WaitVisible(css(`tr[data-key="order-3"]`)),
				chromedp.Click(css(`tr[data-key="order-3"] a`)),
				chromedp.WaitVisible(css(`#resume`)),
				chromedp.Click(css(`#resume`)),
				chromedp.WaitVisible(css(`#flash`)),
			)
			state = value(t, tab, "state", chromedp.Text(css(`#state`)))
			if state != "completed" {
				t.Fatalf("after resume order-3 shows as %q", state)
			}

			// Discard order-2 (same origin): gone.
			run(t, tab, "discard",
				chromedp.Navigate(s.detailURL("order-2")),
				chromedp.Click(css(`#discard`)),
				chromedp.WaitVisible(css(`#flash`)),
				chromedp.WaitVisible(css(`#empty`)),
			)
			if _, err := s.record(t, "order-2"); !errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("after discard order-2: %v", err)
			}

			// A dependency goes down, then up.
			sel := func(state string) string {
				return fmt.Sprintf(`article[data-dep=%q][data-state=%q]`, strings.TrimPrefix(s.backend.URL, "http://"), state)
			}
			s.takeDown(t)
			run(t, tab, "dependency down",
				chromedp.Navigate(s.base+"/"),
				chromedp.WaitVisible(css(sel("down"))),
			)
			s.bringUp(t)
			run(t, tab, "dependency up",
				chromedp.Navigate(s.base+"/"),
				chromedp.WaitVisible(css(sel("up"))),
			)
		})
	}
}

// TestAnyKeyInBrowser: a message keyed by a broker id with a space, a
// non-ASCII letter, URL syntax, a NUL or bytes that are not UTF-8 is
// listed, shown, retried and discarded with the page's buttons, against
// every store (issue 41).
func TestAnyKeyInBrowser(t *testing.T) {
	browser := newBrowser(t)
	keys := []string{"order 42", "objednávka-7", "a/b?c=d#e&f+g%h", `say "hi" <b>`, "nul\x00cr\rlf\n", "bad\xffutf8"}
	for _, sc := range storeCases {
		t.Run(sc.name, func(t *testing.T) {
			tab := browser
			s := newService(t, sc, nil)
			for _, k := range keys {
				s.park(t, k)
			}
			run(t, tab, "list parked",
				chromedp.Navigate(s.base+"/executions?state=parked"),
				chromedp.WaitVisible(css(`table.executions`)),
			)
			if n := value(t, tab, "rows", chromedp.Evaluate[int](`document.querySelectorAll("tr[data-key]").length`)); n != len(keys) {
				t.Fatalf("the parked list shows %d rows, want %d", n, len(keys))
			}
			for i, k := range keys {
				action := "retry"
				if i%2 == 1 {
					action = "discard"
				}
				run(t, tab, fmt.Sprintf("%s %q", action, k),
					chromedp.Navigate(s.detailURL(k)),
					chromedp.WaitVisible(css(`#`+action)),
					chromedp.Click(css(`#`+action)),
					chromedp.WaitVisible(css(`#flash`)),
				)
				r, err := s.record(t, k)
				switch {
				case action == "discard" && !errors.Is(err, idempotency.ErrNotFound):
					t.Fatalf("after discard %q: %+v, %v", k, r, err)
				case action == "retry" && (err != nil || r.State != idempotency.StateCompleted):
					t.Fatalf("after retry %q: %+v, %v", k, r, err)
				}
			}
		})
	}
}

// TestScreenshot takes the README's screenshot of the overview, with a
// history of outages in the chart, and checks that the pages fit a
// phone's width.
func TestScreenshot(t *testing.T) {
	browser := newBrowser(t)
	tab := browser
	mock := clock.NewMock()
	mock.Set(time.Now())
	s := newService(t, storeCases[0], mock)
	s.park(t, "order-1042")
	s.park(t, "order-1043")
	s.stall(t, "order-1044")
	s.advance(lease + time.Second)
	view := func() { run(t, tab, "overview", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(css(`main`))) }
	for round := range 3 {
		for range 3 + round {
			s.call()
			mock.Add(time.Second)
			view()
		}
		s.takeDown(t)
		for range 3 {
			mock.Add(time.Second)
			view()
		}
		s.bringUp(t)
	}
	mock.Add(time.Second)
	run(t, tab, "overview",
		chromedp.EmulateViewport(1100, 900),
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(css(`svg.chart`)),
	)
	shot := value(t, tab, "screenshot", chromedp.FullScreenshot(100))
	if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	path := filepath.Join(t.TempDir(), "screenshot.png")
	if *updateScreenshot {
		path = filepath.Join("..", "docs", "screenshot.png")
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))

	// On a phone nothing runs off the side.
	for _, target := range []string{"/", "/executions?state=parked", "/execution?caller=shop&key=order-1042"} {
		run(t, tab, "phone "+target,
			chromedp.EmulateViewport(375, 740, chromedp.EmulateMobile),
			chromedp.Navigate(s.base+target),
			chromedp.WaitVisible(css(`main`)),
		)
		fits := value(t, tab, "width", chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
		if !fits {
			t.Fatalf("%s is wider than a phone", target)
		}
	}
}
