package bench

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// Smoke tests: every scenario, every library, small numbers, no timing
// assertions. They check that the harness counts what it should and that our
// client keeps its promises.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestOutagePolicy(t *testing.T) {
	t.Parallel()
	for _, lib := range Libraries() {
		t.Run(lib.Name, func(t *testing.T) {
			t.Parallel()
			r := Outage(testCtx(t), lib, OutageConfig{Policy: Comparable, Callers: 2, Requests: 2, Window: 30 * time.Second, RequestTimeout: 10 * time.Second})
			if r.Requests != 4 || r.Cut != 0 {
				t.Fatalf("%+v: want 4 completed requests", r)
			}
			want := float64(PolicyAttempts)
			if !lib.Retries {
				want = 1
			}
			if r.PerRequest() != want {
				t.Errorf("%+v: %.2f attempts per request, want %v", r, r.PerRequest(), want)
			}
		})
	}
}

func TestNestedPolicy(t *testing.T) {
	t.Parallel()
	for _, lib := range Libraries() {
		t.Run(lib.Name, func(t *testing.T) {
			t.Parallel()
			r := Nested(testCtx(t), lib, NestedConfig{Policy: Comparable, Requests: 1, Callers: 1, RequestTimeout: 30 * time.Second})
			want := PolicyAttempts * PolicyAttempts * PolicyAttempts
			switch {
			case lib.Name == "exactlyonce":
				want = PolicyAttempts // one layer retries; pushback stops the others
			case !lib.Retries:
				want = 1
			}
			if r.Requests != 1 || r.Innermost != want {
				t.Errorf("%+v: %d innermost attempts, want %d", r, r.Innermost, want)
			}
		})
	}
}

func TestSemantics(t *testing.T) {
	t.Parallel()
	for _, lib := range Libraries() {
		t.Run(lib.Name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			rp := BodyReplay(ctx, lib, 1)
			wantAttempts := 2
			if !lib.Retries {
				wantAttempts = 1
			}
			if rp.Attempts != wantAttempts {
				t.Errorf("body replay: %+v, want %d attempts", rp, wantAttempts)
			}
			if lib.Retries && !rp.Intact {
				t.Errorf("body replay: %+v, body not intact", rp)
			}
			if ours := lib.Name == "exactlyonce"; rp.KeySent != ours || rp.AnyKey != ours {
				t.Errorf("body replay: %+v, key sent %v, want %v", rp, rp.KeySent, ours)
			}
			cr := ConnReuse(ctx, lib, 3)
			if cr.Conns < 1 || cr.Attempts != 3*wantAttempts {
				t.Errorf("conn reuse: %+v", cr)
			}
			if lib.Name == "exactlyonce" && cr.Conns != 1 {
				t.Errorf("conn reuse: %+v, want one connection", cr)
			}
			lr := LongRetryAfter(ctx, lib)
			if lib.Name == "exactlyonce" && (lr.Attempts != 1 || lr.LongVerdict() != "returns at once") {
				t.Errorf("long Retry-After: %+v (%s)", lr, lr.LongVerdict())
			}
		})
	}
}

func TestRetryAfterOurs(t *testing.T) {
	t.Parallel()
	lib, _ := LibraryNamed("exactlyonce")
	for name, value := range map[string]func() string{"seconds": RetryAfterSeconds, "date": RetryAfterDate} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := RetryAfter(testCtx(t), lib, value, 10*time.Second)
			if !r.Honoured() {
				t.Errorf("%+v: Retry-After not honoured", r)
			}
		})
	}
}

func TestStormSmall(t *testing.T) {
	t.Parallel()
	lib, _ := LibraryNamed("exactlyonce")
	r := Storm(testCtx(t), lib, StormConfig{
		Policy: Defaults, Rate: 100, Offer: 500 * time.Millisecond, Outage: 200 * time.Millisecond,
		Window: time.Second, Bucket: 100 * time.Millisecond, RequestTimeout: time.Second, MaxInFlight: 100,
	})
	if r.Requests+r.Skipped != 50 || len(r.Attempts) != 10 {
		t.Fatalf("%+v: want 50 requests in 10 buckets", r)
	}
	if r.Total() < r.Requests {
		t.Errorf("%+v: fewer attempts than requests", r)
	}
}

func TestCost(t *testing.T) {
	t.Parallel()
	for _, lib := range Libraries() {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			resp, err := lib.New(Defaults, memTransport{}).Do(mustRequest(t, m))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %v, %v", lib.Name, m, resp, err)
				continue
			}
			resp.Body.Close()
		}
	}
}

func mustRequest(t *testing.T, method string) *http.Request {
	t.Helper()
	var body []byte
	if method == http.MethodPost {
		body = costPayload
	}
	req, err := newRequest(context.Background(), method, "http://bench.invalid/op", "", body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
