package bench

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// defaultAttempts is the retry package's default number of attempts in all
// (retry.WithMaxAttempts).
const defaultAttempts = 4

// Smoke tests: one run of every scenario on every library with small
// numbers, shared by the tests below. They check that the harness counts
// what it should and that our client keeps its promises; no timing
// assertions beyond the scenarios' own coarse verdicts.

var (
	quickOnce sync.Once
	quick     Results
)

func quickResults(t *testing.T) Results {
	t.Helper()
	quickOnce.Do(func() {
		// A bound, not a figure: the run takes well under it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		quick = Run(ctx, QuickSettings(), io.Discard)
	})
	if len(quick.Libs) != len(Libraries()) {
		t.Fatalf("quick run has %d libraries, want %d", len(quick.Libs), len(Libraries()))
	}
	return quick
}

func isOurs(l Library) bool { return l.Name == "exactlyonce" }

func TestOutagePolicy(t *testing.T) {
	res := quickResults(t)
	s := res.Settings
	for _, r := range res.Libs {
		if r.PolicySeq.Requests != s.PolicyRequests || r.PolicyConc.Requests != s.Callers*s.CallerRequests {
			t.Errorf("%s: %+v, %+v: not every request completed", r.Library.Name, r.PolicySeq, r.PolicyConc)
			continue
		}
		want := float64(PolicyAttempts)
		if !r.Library.Retries {
			want = 1
		}
		for _, o := range []OutageResult{r.PolicySeq, r.PolicyConc} {
			switch {
			case isOurs(r.Library):
				// Ours stops sending once the service failed 8 times
				// in a row: its requests wait for it instead.
				if o.PerRequest() > want || o.Attempts < 8 {
					t.Errorf("%s: %+v: %.2f attempts per request, want at most %v", r.Library.Name, o, o.PerRequest(), want)
				}
			case o.PerRequest() != want:
				t.Errorf("%s: %+v: %.2f attempts per request, want %v", r.Library.Name, o, o.PerRequest(), want)
			}
		}
	}
}

func TestOutageDefaultsCounts(t *testing.T) {
	res := quickResults(t)
	for _, r := range res.Libs {
		if !r.Library.HasDefaults {
			continue
		}
		for _, o := range []OutageResult{r.DefaultsSeq, r.DefaultsConc} {
			if o.Requests > 0 && o.PerRequest() < 1 {
				t.Errorf("%s: %+v: fewer attempts than requests", r.Library.Name, o)
			}
		}
		if isOurs(r.Library) && r.DefaultsConc.Requests == 0 {
			t.Errorf("ours: %+v: no request completed within the window", r.DefaultsConc)
		}
	}
}

func TestNested(t *testing.T) {
	res := quickResults(t)
	for _, r := range res.Libs {
		want := PolicyAttempts * PolicyAttempts * PolicyAttempts
		switch {
		case isOurs(r.Library):
			want = PolicyAttempts // one layer retries; pushback stops the others
		case !r.Library.Retries:
			want = 1
		}
		if r.NestedPolicy.Requests != 1 || r.NestedPolicy.Innermost != want {
			t.Errorf("%s: %+v: want %d innermost attempts", r.Library.Name, r.NestedPolicy, want)
		}
		if isOurs(r.Library) && r.NestedDefaults.Innermost != defaultAttempts {
			t.Errorf("ours, defaults: %+v: want %d innermost attempts", r.NestedDefaults, defaultAttempts)
		}
	}
}

func TestReplayKeysReuse(t *testing.T) {
	res := quickResults(t)
	for _, r := range res.Libs {
		if !r.Library.Retries {
			continue
		}
		name := r.Library.Name
		if r.Replay.Attempts != 2 || !r.Replay.Intact {
			t.Errorf("%s: body replay %+v: want 2 attempts, body intact", name, r.Replay)
		}
		if ours := isOurs(r.Library); r.Replay.KeySent != ours || r.Replay.AnyKey != ours {
			t.Errorf("%s: body replay %+v: key sent, want %v", name, r.Replay, ours)
		}
		if r.Reuse.Attempts != 2*r.Reuse.Requests || r.Reuse.Conns < 1 {
			t.Errorf("%s: reuse %+v", name, r.Reuse)
		}
		if isOurs(r.Library) && r.Reuse.Conns != 1 {
			t.Errorf("ours: reuse %+v: want one connection", r.Reuse)
		}
	}
}

// Against a server that ignores keys, a POST whose connection was reset
// after its effect is not sent again by ours (nor by the plain client):
// no duplicate. Each tenth request is reset once.
func TestIgnoredKeysNoDuplicateOurs(t *testing.T) {
	res := quickResults(t)
	for _, r := range res.Libs {
		ik := r.IgnoredKeys
		if ik.Requests == 0 || ik.Effects < ik.Requests-ik.Failed {
			t.Errorf("%s: ignored keys %+v: a request without its effect", r.Library.Name, ik)
		}
		if (isOurs(r.Library) || !r.Library.Retries) && ik.Duplicates != 0 {
			t.Errorf("%s: ignored keys %+v: want no duplicate", r.Library.Name, ik)
		}
		t.Logf("%s: %+v", r.Library.Name, ik)
	}
}

func TestRetryAfterOurs(t *testing.T) {
	res := quickResults(t)
	r := res.Libs[0]
	if !isOurs(r.Library) {
		t.Fatalf("first library is %s", r.Library.Name)
	}
	if !r.RASeconds.Honoured() || !r.RADate.Honoured() {
		t.Errorf("Retry-After not honoured: seconds %+v, date %+v", r.RASeconds, r.RADate)
	}
	// Sleeping would have ended in the request's deadline, not a response.
	if r.RALong.Attempts != 1 || r.RALong.Err != nil || r.RALong.Status != http.StatusServiceUnavailable {
		t.Errorf("Retry-After 3600 with 2 s left: %+v, want the 503 handed back", r.RALong)
	}
}

func TestStormCounts(t *testing.T) {
	res := quickResults(t)
	st := res.Settings.Storm
	for _, r := range res.Libs {
		checkStormCounts(t, r.Library.Name, st, r.Storm)
		checkStormCounts(t, r.Library.Name+", slow server", res.Settings.SlowStorm, r.SlowStorm)
	}
}

// checkStormCounts checks that a storm's requests add up.
func checkStormCounts(t *testing.T, name string, st StormConfig, r StormResult) {
	t.Helper()
	offered := int(st.Offer.Seconds() * float64(st.Rate))
	if r.Requests+r.Skipped != offered || len(r.Attempts) != int(st.Window/st.Bucket) {
		t.Errorf("%s: %+v: want %d requests in %d buckets", name, r, offered, st.Window/st.Bucket)
	}
	if r.Succeeded > r.Requests || len(r.After) > r.Requests {
		t.Errorf("%s: %+v: more successes, or requests after the outage, than requests", name, r)
	}
}

func TestCost(t *testing.T) {
	t.Parallel()
	srv := costServer()
	defer srv.Close()
	for _, lib := range Libraries() {
		for _, cc := range CostCases {
			base, url := costBase(cc, srv.URL)
			var body []byte
			if cc.Method == http.MethodPost {
				body = costPayload
			}
			if err := costOnce(lib.New(Defaults, base), cc, url, body); err != nil {
				t.Errorf("%s, %s: %v", lib.Name, cc.Name, err)
			}
			if tr, ok := base.(*http.Transport); ok {
				tr.CloseIdleConnections()
			}
		}
	}
}

func TestOverloadCounts(t *testing.T) {
	res := quickResults(t)
	ov := res.Settings.Overload
	offered := int(ov.Offer.Seconds() * float64(ov.Rate))
	for _, r := range res.Libs {
		for _, o := range []OverloadResult{r.OverloadDefaults, r.OverloadPolicy, r.Queueing} {
			checkOverloadCounts(t, r.Library.Name, offered, r.Library.Retries, o)
		}
	}
}

// checkOverloadCounts checks that an overload run's requests, attempts and
// work add up.
func checkOverloadCounts(t *testing.T, name string, offered int, retries bool, o OverloadResult) {
	t.Helper()
	var n, ok, inSeries int
	for i := range o.Offered {
		n += o.Offered[i]
		ok += o.Succeeded[i]
	}
	for _, a := range o.Attempts {
		inSeries += a
	}
	// Attempts after the series' last bucket (retries of the last
	// requests, late on a busy machine) count in Arrived alone.
	if n != offered || ok > n || o.Wasted > o.Served || o.Served > o.Arrived || inSeries > o.Arrived || len(o.Attempts) != len(o.Offered) {
		t.Errorf("%s: %d offered (want %d), %d succeeded, %d served of %d attempts (%d in the series), %d wasted",
			name, n, offered, ok, o.Served, o.Arrived, inSeries, o.Wasted)
	}
	if !retries && o.AttemptsPerRequest() > 1 {
		t.Errorf("%s: %.2f attempts per request without retries", name, o.AttemptsPerRequest())
	}
}

func TestClosedLoopCounts(t *testing.T) {
	res := quickResults(t)
	cl := res.Settings.ClosedLoop
	for _, r := range res.Libs {
		checkClosedLoopCounts(t, r.Library.Name, cl, isOurs(r.Library), r.ClosedLoop)
	}
}

// checkClosedLoopCounts checks that a closed-loop run's calls add up, and
// that ours (alone) was run again with riding through off.
func checkClosedLoopCounts(t *testing.T, name string, cl ClosedLoopConfig, ours bool, c ClosedLoopResult) {
	t.Helper()
	runs := []ClosedLoopResult{c}
	if c.Off != nil {
		runs = append(runs, *c.Off)
	}
	for _, c := range runs {
		if c.Calls != cl.Calls || c.Succeeded > c.Calls || c.Attempts < c.Succeeded || c.Took <= 0 {
			t.Errorf("%s: %+v", name, c)
		}
	}
	if (c.Off != nil) != ours {
		t.Errorf("%s: a run with riding through off: %v", name, c.Off != nil)
	}
}
