package bench

import (
	"testing"
	"time"
)

// The overload figures are read off the buckets as their docs say.
func TestOverloadFigures(t *testing.T) {
	r := OverloadResult{
		Bucket: time.Second, TriggerAt: 2 * time.Second, TriggerEnd: 4 * time.Second, Offer: 8 * time.Second,
		Offered:   []int{10, 10, 10, 10, 10, 10, 10, 10},
		Succeeded: []int{10, 10, 5, 3, 9, 10, 9, 10},
		Attempts:  []int{10, 10, 20, 40, 12, 10, 10, 10},
		Sent:      132, Served: 100, Wasted: 25,
	}
	if got := r.Before(); got != 1 {
		t.Errorf("before %v, want 1", got)
	}
	if got := r.During(); got != 0.4 {
		t.Errorf("during %v, want 0.4", got)
	}
	if got := r.After(); got != 38.0/40 {
		t.Errorf("after %v, want 0.95", got)
	}
	// Bucket 6 (9 of 10) is under 95%: recovered from bucket 7, 3 s after the end.
	if d, ok := r.Recovery(); !ok || d != 3*time.Second {
		t.Errorf("recovery %v %v, want 3s", d, ok)
	}
	if got := r.PeakRate(); got != 40 {
		t.Errorf("peak %v, want 40", got)
	}
	if got := r.AttemptsPerRequest(); got != 132.0/80 {
		t.Errorf("attempts per request %v", got)
	}
	if got := r.WastedShare(); got != 0.25 {
		t.Errorf("wasted %v", got)
	}
	r.Succeeded[7] = 0
	if _, ok := r.Recovery(); ok {
		t.Error("recovered, though the last bucket failed")
	}
	r.Succeeded = []int{10, 10, 10, 10, 10, 10, 10, 10}
	if d, ok := r.Recovery(); !ok || d != 0 {
		t.Errorf("recovery %v %v, want 0 (at once)", d, ok)
	}
}

// Quantiles of the time taken after the recovery are nearest-rank.
func TestStormAfterQuantile(t *testing.T) {
	var r StormResult
	if r.AfterQuantile(0.99) != 0 {
		t.Error("no requests: want 0")
	}
	for i := 100; i >= 1; i-- {
		r.After = append(r.After, time.Duration(i)*time.Millisecond)
	}
	if got := r.AfterQuantile(0.5); got != 50*time.Millisecond {
		t.Errorf("p50 %v", got)
	}
	if got := r.AfterQuantile(0.99); got != 99*time.Millisecond {
		t.Errorf("p99 %v", got)
	}
	if got := r.AfterQuantile(1); got != 100*time.Millisecond {
		t.Errorf("p100 %v", got)
	}
	if r.After[0] != 100*time.Millisecond {
		t.Error("the quantile sorted the result's own slice")
	}
}

// A cut takes CutLength attempts after every CutEvery.
func TestClosedLoopCuts(t *testing.T) {
	cfg := ClosedLoopConfig{CutEvery: 3, CutLength: 2}
	var got []bool
	for n := int64(1); n <= 10; n++ {
		got = append(got, cfg.cut(n))
	}
	want := []bool{false, false, false, true, true, false, false, false, true, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("cuts %v, want %v", got, want)
		}
	}
	if (ClosedLoopConfig{}).cut(1) {
		t.Error("no cuts configured, yet a cut")
	}
}
