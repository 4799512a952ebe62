package bench

import (
	"context"
	"slices"
	"sync"
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
		Served:    100, Wasted: 25, Arrived: 130, // 8 after the last bucket
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
	// From the slowdown on, over two buckets: 20+40 is the most.
	if got := r.PeakRateFrom(2*time.Second, 2*time.Second); got != 30 {
		t.Errorf("peak from the slowdown, over 2 s: %v, want 30", got)
	}
	if got := r.PeakRateFrom(4*time.Second, time.Second); got != 12 {
		t.Errorf("peak from 4 s on: %v, want 12", got)
	}
	if got := r.AttemptsPerRequest(); got != 130.0/80 {
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

// A storm's service time is ServiceTime plus a part of ServiceSpread, by a
// fixed sequence.
func TestStormServiceTime(t *testing.T) {
	cfg := StormConfig{ServiceTime: 10 * time.Millisecond, ServiceSpread: 10 * time.Millisecond}
	seen := map[time.Duration]bool{}
	for n := uint64(1); n <= 1000; n++ {
		d := cfg.serviceTime(n)
		if d < 10*time.Millisecond || d > 20*time.Millisecond {
			t.Fatalf("attempt %d takes %v, want 10-20 ms", n, d)
		}
		if d != cfg.serviceTime(n) {
			t.Fatalf("attempt %d: not a fixed sequence", n)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct service times in 1000 attempts", len(seen))
	}
	if d := (StormConfig{ServiceTime: 3 * time.Millisecond}).serviceTime(7); d != 3*time.Millisecond {
		t.Errorf("no spread: %v, want 3ms", d)
	}
	if d := (StormConfig{}).serviceTime(7); d != 0 {
		t.Errorf("no service time: %v, want 0", d)
	}
}

// The capacity pool refuses a request when its queue is full, does the
// work of one whose caller left and counts it as wasted, and counts every
// arrival in its bucket.
func TestCapacityPool(t *testing.T) {
	cfg := OverloadConfig{Workers: 1, Queue: 1, ServiceTime: time.Millisecond, Slowdown: 4,
		TriggerAt: time.Hour, Trigger: time.Hour, Bucket: time.Hour}
	p := newCapacityPool(cfg, 2)
	p.start = time.Now()
	if !p.serve(context.Background()) {
		t.Fatal("an idle pool refused a request")
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if !p.serve(gone) {
		t.Fatal("an idle pool refused a request whose caller left")
	}
	p.slots <- struct{}{} // the queue and the worker taken
	p.slots <- struct{}{}
	if p.serve(context.Background()) {
		t.Error("a full pool admitted a request")
	}
	res := p.result([]int{3}, []int{1})
	if res.Served != 2 || res.Wasted != 1 || res.Attempts[0] != 3 || res.Arrived != 3 {
		t.Errorf("served %d, wasted %d, attempts %v, arrived %d; want 2, 1, [3], 3", res.Served, res.Wasted, res.Attempts, res.Arrived)
	}
	if got := p.serviceTime(time.Hour); got != 4*time.Millisecond {
		t.Errorf("service time in the slowdown %v, want 4ms", got)
	}
	if got := p.serviceTime(2 * time.Hour); got != time.Millisecond {
		t.Errorf("service time after the slowdown %v, want 1ms", got)
	}
}

// The server that queues without bound admits every request however many
// wait, and answers one that waited longer than MaxQueueWait for a worker
// without work.
func TestQueueingPool(t *testing.T) {
	cfg := OverloadConfig{Workers: 1, Unbounded: true, ServiceTime: time.Microsecond, Slowdown: 1,
		TriggerAt: time.Hour, Trigger: time.Hour, Bucket: time.Hour}
	p := newCapacityPool(cfg, 1)
	p.start = time.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if !p.serve(context.Background()) {
				t.Error("refused without MaxQueueWait")
			}
		})
	}
	wg.Wait()
	p.cfg.MaxQueueWait = time.Nanosecond // any wait is longer
	if p.serve(context.Background()) {
		t.Error("served a request that waited longer than MaxQueueWait")
	}
	res := p.result([]int{21}, []int{0})
	if res.Arrived != 21 || res.Served != 20 {
		t.Errorf("arrived %d, served %d; want 21, 20", res.Arrived, res.Served)
	}
}

// The open-loop offer makes every request once, by its bucket of the time
// it was due, and counts the successes there.
func TestOverloadOffer(t *testing.T) {
	cfg := OverloadConfig{Rate: 1000, Offer: 20 * time.Millisecond, Bucket: 10 * time.Millisecond, MaxInFlight: 100}
	var mu sync.Mutex
	made := map[int]int{}
	offered, succeeded := cfg.offer(context.Background(), time.Now(), func(_ context.Context, i int) bool {
		mu.Lock()
		made[i]++
		mu.Unlock()
		return i%2 == 0
	})
	if len(made) != 20 {
		t.Errorf("%d requests made, want 20", len(made))
	}
	for i, n := range made {
		if n != 1 {
			t.Errorf("request %d made %d times", i, n)
		}
	}
	if len(offered) != 2 || offered[0] != 10 || offered[1] != 10 || succeeded[0] != 5 || succeeded[1] != 5 {
		t.Errorf("offered %v, succeeded %v; want [10 10], [5 5]", offered, succeeded)
	}
}

// The closed loop makes every call once and counts its successes.
func TestClosedLoopDrive(t *testing.T) {
	cfg := ClosedLoopConfig{Callers: 3, Calls: 10}
	var mu sync.Mutex
	made := map[int64]int{}
	took, succeeded := cfg.drive(context.Background(), func(_ context.Context, i int64) bool {
		mu.Lock()
		made[i]++
		mu.Unlock()
		return i%2 == 1
	})
	if len(made) != 10 || succeeded != 5 || took <= 0 {
		t.Errorf("%d calls made, %d succeeded, took %v; want 10, 5", len(made), succeeded, took)
	}
	for i := int64(1); i <= 10; i++ {
		if made[i] != 1 {
			t.Errorf("call %d made %d times", i, made[i])
		}
	}
}

// The closed loop's result is its run of median length, on and off apart,
// each run of ours followed by one with riding through off.
func TestClosedLoopMedian(t *testing.T) {
	cfg := ClosedLoopConfig{Runs: 4}
	var order []string
	lengths := []time.Duration{40, 10, 30, 20}
	var i, j int
	res := cfg.median(func() ClosedLoopResult {
		order = append(order, "on")
		i++
		return ClosedLoopResult{Took: lengths[i-1], Succeeded: i}
	}, func() ClosedLoopResult {
		order = append(order, "off")
		j++
		return ClosedLoopResult{Took: 100 * lengths[4-j], Succeeded: 10 * j}
	})
	if want := []string{"on", "off", "on", "off", "on", "off", "on", "off"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if res.Took != 20 || res.Succeeded != 4 {
		t.Errorf("on: %+v, want the run of 20", res)
	}
	if res.Off == nil || res.Off.Took != 2000 || res.Off.Succeeded != 10 {
		t.Errorf("off: %+v, want the run of 2000", res.Off)
	}
	if got := (ClosedLoopConfig{}).median(func() ClosedLoopResult { return ClosedLoopResult{Took: 7} }, nil); got.Took != 7 || got.Off != nil {
		t.Errorf("one run without off: %+v", got)
	}
}
