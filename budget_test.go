package retry_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// budgetEpoch is an arbitrary start time: the budget never reads the clock.
var budgetEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// budgetMicro converts tokens to the budget's fixed-point millionths.
func budgetMicro(tokens float64) int64 { return int64(math.Round(tokens * 1e6)) }

// floorPeriod is the time between two floor grants, as an exact duration.
func floorPeriod(t *testing.T, floor float64) time.Duration {
	t.Helper()
	p := time.Duration(math.Round(float64(time.Second) / floor))
	require.InDelta(t, float64(time.Second)/floor, float64(p), 1e-9, "the period must be a whole number of nanoseconds")
	return p
}

// coarseBound is the Budget doc's bound: capacity + ratio*S +
// floor*(t1-t0) + burst.
func coarseBound(capacity, ratio, floor float64, successes uint64, span time.Duration) float64 {
	bound := capacity + ratio*float64(successes)
	if floor > 0 {
		bound += floor*span.Seconds() + 1
	}
	return bound
}

func TestBudgetOutageExactBound(t *testing.T) {
	t.Parallel()
	const (
		requests   = 2000
		maxRetries = 3
		dRatio     = retry.DefaultBudgetRatio
		dFloor     = retry.DefaultBudgetFloor
		dCapacity  = retry.DefaultBudgetCapacity
	)
	tests := []struct {
		name     string
		ratio    float64
		floor    float64
		capacity float64
		step     time.Duration // time between two requests
		defaults bool          // the default parameters: check 1.10 attempts per request
	}{
		{name: "defaults, 2s outage", ratio: dRatio, floor: dFloor, capacity: dCapacity, step: time.Millisecond, defaults: true},
		{name: "defaults, 20s outage", ratio: dRatio, floor: dFloor, capacity: dCapacity, step: 10 * time.Millisecond, defaults: true},
		{name: "defaults, 100s outage", ratio: dRatio, floor: dFloor, capacity: dCapacity, step: 50 * time.Millisecond, defaults: true},
		{name: "suggested capacity 10", ratio: 0.1, floor: 1, capacity: 10, step: 10 * time.Millisecond},
		{name: "no floor", ratio: 0.1, floor: 0, capacity: 10, step: time.Millisecond},
		{name: "fractional capacity", ratio: 0.1, floor: 1, capacity: 10.5, step: time.Millisecond},
		{name: "capacity multiple of 3", ratio: 0.2, floor: 2, capacity: 9, step: 250 * time.Millisecond},
		{name: "slow floor", ratio: 0.1, floor: 0.5, capacity: 25, step: 100 * time.Millisecond},
		{name: "floor every request", ratio: 0.1, floor: 10, capacity: 1, step: 100 * time.Millisecond},
		{name: "fast floor", ratio: 0.1, floor: 4, capacity: 10, step: time.Millisecond},
		{name: "large capacity", ratio: 0.5, floor: 1, capacity: 100, step: 5 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := retry.NewBudget(tt.ratio, tt.floor, tt.capacity)

			var allowed, asks uint64
			for i := range requests {
				now := budgetEpoch.Add(time.Duration(i) * tt.step)
				for range maxRetries {
					asks++
					if !b.AllowRetry(now) {
						break
					}
					allowed++
				}
			}

			// The bucket pays floor(capacity) retries, 3 per request, so it
			// runs dry during request floor(capacity)/3: that is tf. From
			// then on the floor grants one retry at tf and one per period,
			// since every period is a whole number of steps.
			whole := uint64(math.Floor(tt.capacity))
			var floorWant uint64
			if tt.floor > 0 {
				period := floorPeriod(t, tt.floor)
				require.Zero(t, period%tt.step, "the period must be a whole number of steps")
				tf := time.Duration(whole/maxRetries) * tt.step
				t1 := time.Duration(requests-1) * tt.step
				floorWant = 1 + uint64((t1-tf)/period)
			}
			want := whole + floorWant

			st := b.Stats()
			assert.Equal(t, want, allowed, "retries allowed")
			assert.Equal(t, want, st.RetriesAllowed, "Stats.RetriesAllowed")
			assert.Equal(t, floorWant, st.FloorAllowed, "Stats.FloorAllowed")
			assert.Equal(t, asks-allowed, st.RetriesDenied, "Stats.RetriesDenied")
			assert.Zero(t, st.Successes)
			assert.Equal(t, tt.capacity-float64(whole), st.Tokens, "Stats.Tokens")
			assert.Equal(t, tt.capacity, st.Capacity, "Stats.Capacity")

			span := time.Duration(requests-1) * tt.step
			assert.LessOrEqual(t, float64(allowed), coarseBound(tt.capacity, tt.ratio, tt.floor, 0, span))
			if tt.defaults {
				perRequest := float64(requests+allowed) / requests
				assert.LessOrEqual(t, perRequest, 1.10, "attempts per logical request")
			}
		})
	}
}

// budgetModel is a reference model of Budget for sequential calls, with
// times on a millisecond grid, where the floor's float64 arithmetic is exact.
type budgetModel struct {
	tokens, capacity, ratio int64 // millionths
	period                  time.Duration
	lastFloor               time.Time
	floorUsed               bool
	stats                   retry.BudgetStats
}

func (m *budgetModel) succeeded() {
	m.stats.Successes++
	m.tokens = min(m.tokens+m.ratio, m.capacity)
}

func (m *budgetModel) allowRetry(now time.Time) bool {
	switch {
	case m.tokens >= 1e6:
		m.tokens -= 1e6
	case m.period > 0 && (!m.floorUsed || now.Sub(m.lastFloor) >= m.period):
		m.floorUsed, m.lastFloor = true, now
		m.stats.FloorAllowed++
	default:
		m.stats.RetriesDenied++
		return false
	}
	m.stats.RetriesAllowed++
	return true
}

func TestBudgetMatchesModelAndBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                   string
		ratio, floor, capacity float64
	}{
		{name: "defaults", ratio: retry.DefaultBudgetRatio, floor: retry.DefaultBudgetFloor, capacity: retry.DefaultBudgetCapacity},
		{name: "no floor", ratio: 0.1, floor: 0, capacity: 10},
		{name: "finagle-like", ratio: 0.2, floor: 10, capacity: 20},
		{name: "tiny", ratio: 0.05, floor: 0.5, capacity: 1},
		{name: "fractional", ratio: 0.125, floor: 2, capacity: 3.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := retry.NewBudget(tt.ratio, tt.floor, tt.capacity)
			m := &budgetModel{
				tokens:   budgetMicro(tt.capacity),
				capacity: budgetMicro(tt.capacity),
				ratio:    budgetMicro(tt.ratio),
			}
			if tt.floor > 0 {
				m.period = floorPeriod(t, tt.floor)
			}

			rng := rand.New(rand.NewPCG(1, 2))
			now := budgetEpoch
			mismatches := 0
			// Phases of healthy traffic, partial failure and total outage.
			for phase, failRate := range []float64{0.05, 0.5, 1, 0.2, 1, 0} {
				for range 3000 {
					now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond) // sometimes equal times
					ok := rng.Float64() >= failRate
					for retries := 0; !ok && retries < 3; retries++ {
						got, want := b.AllowRetry(now), m.allowRetry(now)
						if got != want {
							mismatches++
						}
						if !got {
							break
						}
						ok = rng.Float64() >= failRate
					}
					if ok {
						b.Succeeded()
						m.succeeded()
					}
				}
				require.Zero(t, mismatches, "AllowRetry differs from the model in phase %d", phase)
			}

			st := b.Stats()
			m.stats.Tokens = float64(m.tokens) / 1e6
			m.stats.Capacity = tt.capacity
			assert.Equal(t, m.stats, st)

			// The bound, both in its coarse form and per source of retries.
			span := now.Sub(budgetEpoch)
			assert.LessOrEqual(t, float64(st.RetriesAllowed), coarseBound(tt.capacity, tt.ratio, tt.floor, st.Successes, span))
			tokenRetries := st.RetriesAllowed - st.FloorAllowed
			assert.LessOrEqual(t, tokenRetries, uint64(budgetMicro(tt.capacity)+budgetMicro(tt.ratio)*int64(st.Successes))/1e6)
			if tt.floor > 0 {
				assert.LessOrEqual(t, st.FloorAllowed, 1+uint64(span/m.period))
			} else {
				assert.Zero(t, st.FloorAllowed)
			}
		})
	}
}

func TestBudgetHealthyTrafficRetriesEveryFailure(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			const requests = 100_000
			b := retry.NewBudget(0.1, 1, 20)
			rng := rand.New(rand.NewPCG(seed, 5))
			now := budgetEpoch
			var failures, denied int
			minTokens := retry.DefaultBudgetCapacity
			for range requests {
				now = now.Add(time.Millisecond)
				b.Requested()
				for rng.Float64() < 0.05 { // this attempt failed: retry it
					failures++
					if !b.AllowRetry(now) {
						denied++
						break
					}
					minTokens = min(minTokens, b.Stats().Tokens)
				}
				b.Succeeded()
			}
			st := b.Stats()
			assert.Zero(t, denied, "denied retries")
			assert.Zero(t, st.RetriesDenied)
			assert.Zero(t, st.FloorAllowed, "the bucket alone pays for every retry")
			assert.Equal(t, uint64(failures), st.RetriesAllowed)
			assert.Equal(t, uint64(requests), st.Requests)
			assert.Equal(t, uint64(requests), st.Successes)
			assert.Greater(t, failures, requests*4/100, "about 5%% of attempts failed")
			assert.GreaterOrEqual(t, minTokens, retry.DefaultBudgetCapacity/2, "the bucket stays far from empty")
		})
	}
}

func TestBudgetConcurrentOutageKeepsBound(t *testing.T) {
	t.Parallel()
	const (
		callers    = 50
		perCaller  = 40
		requests   = callers * perCaller
		maxRetries = 3
		step       = 2 * time.Millisecond // 2,000 requests over 4 seconds
	)
	b := retry.NewBudget(0.1, 1, 20)
	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		allowed, asks uint64
	)
	for g := range callers {
		wg.Go(func() {
			var myAllowed, myAsks uint64
			for j := range perCaller {
				// Interleaved times: callers do not agree on the order of time.
				now := budgetEpoch.Add(time.Duration(j*callers+g) * step)
				for range maxRetries {
					myAsks++
					if !b.AllowRetry(now) {
						break
					}
					myAllowed++
				}
			}
			mu.Lock()
			allowed += myAllowed
			asks += myAsks
			mu.Unlock()
		})
	}
	wg.Wait()

	st := b.Stats()
	span := time.Duration(requests-1) * step
	assert.Equal(t, allowed, st.RetriesAllowed)
	assert.Equal(t, asks-allowed, st.RetriesDenied)
	assert.Equal(t, uint64(retry.DefaultBudgetCapacity), st.RetriesAllowed-st.FloorAllowed, "every token spent, once")
	assert.Zero(t, st.Tokens)
	assert.GreaterOrEqual(t, st.FloorAllowed, uint64(1))
	assert.LessOrEqual(t, st.FloorAllowed, 1+uint64(span/time.Second))
	assert.LessOrEqual(t, float64(allowed), coarseBound(retry.DefaultBudgetCapacity, retry.DefaultBudgetRatio, retry.DefaultBudgetFloor, 0, span))
	assert.LessOrEqual(t, float64(requests+allowed)/requests, 1.10, "attempts per logical request")
}

func TestBudgetConcurrentMixedKeepsBound(t *testing.T) {
	t.Parallel()
	const (
		callers   = 50
		perCaller = 400
		capacity  = 5.0
		ratio     = 0.25
		floor     = 2.0
		step      = time.Millisecond
	)
	b := retry.NewBudget(ratio, floor, capacity)
	var wg sync.WaitGroup
	counts := make([]retry.BudgetStats, callers)
	for g := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			c := &counts[g]
			for j := range perCaller {
				now := budgetEpoch.Add(time.Duration(j*callers+g) * step)
				b.Requested()
				c.Requests++
				ok := rng.Float64() >= 0.6
				for r := 0; !ok && r < 3; r++ {
					if !b.AllowRetry(now) {
						c.RetriesDenied++
						break
					}
					c.RetriesAllowed++
					ok = rng.Float64() >= 0.6
				}
				if ok {
					b.Succeeded()
					c.Successes++
				}
				if j%50 == 0 {
					tokens := b.Stats().Tokens
					if tokens < 0 || tokens > capacity {
						c.Tokens = tokens // reported below
					}
				}
			}
		})
	}
	wg.Wait()

	var sum retry.BudgetStats
	for _, c := range counts {
		assert.Zero(t, c.Tokens, "tokens out of [0, capacity]")
		sum.Requests += c.Requests
		sum.Successes += c.Successes
		sum.RetriesAllowed += c.RetriesAllowed
		sum.RetriesDenied += c.RetriesDenied
	}
	st := b.Stats()
	assert.Equal(t, sum.Requests, st.Requests)
	assert.Equal(t, sum.Successes, st.Successes)
	assert.Equal(t, sum.RetriesAllowed, st.RetriesAllowed)
	assert.Equal(t, sum.RetriesDenied, st.RetriesDenied)
	assert.GreaterOrEqual(t, st.Tokens, 0.0)
	assert.LessOrEqual(t, st.Tokens, capacity)
	assert.Positive(t, st.RetriesDenied, "the budget was exercised")

	span := time.Duration(callers*perCaller-1) * step
	assert.LessOrEqual(t, float64(st.RetriesAllowed), coarseBound(capacity, ratio, floor, st.Successes, span))
	assert.LessOrEqual(t, st.RetriesAllowed-st.FloorAllowed, uint64(math.Floor(capacity+ratio*float64(st.Successes))))
	assert.LessOrEqual(t, st.FloorAllowed, 1+uint64(span.Seconds()*floor))
}

func TestBudgetTimeGoingBackwardKeepsBound(t *testing.T) {
	t.Parallel()
	b := retry.NewBudget(0.1, 1, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	lo, hi := budgetEpoch, budgetEpoch
	for range 10_000 {
		now := budgetEpoch.Add(time.Duration(rng.IntN(60_000)) * time.Millisecond)
		if now.Before(lo) {
			lo = now
		}
		if now.After(hi) {
			hi = now
		}
		b.AllowRetry(now)
	}
	st := b.Stats()
	assert.Equal(t, uint64(1), st.RetriesAllowed-st.FloorAllowed)
	assert.LessOrEqual(t, st.FloorAllowed, 1+uint64(hi.Sub(lo)/time.Second))
}

func TestBudgetNilIsUnlimited(t *testing.T) {
	t.Parallel()
	var b *retry.Budget
	for i := range 1000 {
		assert.True(t, b.AllowRetry(budgetEpoch.Add(time.Duration(i))))
	}
	assert.NotPanics(t, b.Succeeded)
	assert.NotPanics(t, b.Requested)
	assert.Equal(t, retry.BudgetStats{}, b.Stats())
	assert.NotEmpty(t, b.Stats().String())
}

func TestBudgetZeroValueRejectsRetries(t *testing.T) {
	t.Parallel()
	var b retry.Budget
	b.Requested()
	b.Succeeded()
	assert.False(t, b.AllowRetry(budgetEpoch))
	assert.False(t, b.AllowRetry(budgetEpoch.Add(time.Hour)))
	assert.Equal(t, retry.BudgetStats{Requests: 1, Successes: 1, RetriesDenied: 2}, b.Stats())
}

func TestBudgetClampsArguments(t *testing.T) {
	t.Parallel()
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name            string
		ratio, floor    float64
		capacity        float64
		wantCapacity    float64
		wantAfterEarn   float64 // tokens after draining, then 10 successes
		wantFloorPerMin uint64  // retries allowed by an empty bucket in one minute, one ask per ms
	}{
		{name: "defaults", ratio: 0.1, floor: 1, capacity: 20, wantCapacity: 20, wantAfterEarn: 1, wantFloorPerMin: 60},
		{name: "zero capacity", ratio: 0.1, floor: 1, capacity: 0, wantCapacity: 1, wantAfterEarn: 1, wantFloorPerMin: 60},
		{name: "negative capacity", ratio: 0.1, floor: 1, capacity: -3, wantCapacity: 1, wantAfterEarn: 1, wantFloorPerMin: 60},
		{name: "NaN capacity", ratio: 0.1, floor: 1, capacity: nan, wantCapacity: 1, wantAfterEarn: 1, wantFloorPerMin: 60},
		{name: "capacity below one", ratio: 0.01, floor: 1, capacity: 0.5, wantCapacity: 1, wantAfterEarn: 0.1, wantFloorPerMin: 60},
		{name: "infinite capacity", ratio: 0.1, floor: 1, capacity: inf, wantCapacity: 1e9},
		{name: "huge capacity", ratio: 0.1, floor: 1, capacity: 1e12, wantCapacity: 1e9},
		{name: "small capacity", ratio: 0.1, floor: 1, capacity: 3, wantCapacity: 3, wantAfterEarn: 1, wantFloorPerMin: 60},
		{name: "negative ratio", ratio: -0.5, floor: 1, capacity: 20, wantCapacity: 20, wantAfterEarn: 0, wantFloorPerMin: 60},
		{name: "NaN ratio", ratio: nan, floor: 1, capacity: 20, wantCapacity: 20, wantAfterEarn: 0, wantFloorPerMin: 60},
		{name: "ratio rounds to zero", ratio: 1e-7, floor: 1, capacity: 20, wantCapacity: 20, wantAfterEarn: 0, wantFloorPerMin: 60},
		{name: "ratio above capacity", ratio: 50, floor: 1, capacity: 20, wantCapacity: 20, wantAfterEarn: 20, wantFloorPerMin: 60},
		{name: "infinite ratio", ratio: inf, floor: 1, capacity: 20, wantCapacity: 20, wantAfterEarn: 20, wantFloorPerMin: 60},
		{name: "zero floor", ratio: 0.1, floor: 0, capacity: 20, wantCapacity: 20, wantAfterEarn: 1, wantFloorPerMin: 0},
		{name: "negative floor", ratio: 0.1, floor: -1, capacity: 20, wantCapacity: 20, wantAfterEarn: 1, wantFloorPerMin: 0},
		{name: "NaN floor", ratio: 0.1, floor: nan, capacity: 20, wantCapacity: 20, wantAfterEarn: 1, wantFloorPerMin: 0},
		{name: "negative infinite floor", ratio: 0.1, floor: math.Inf(-1), capacity: 20, wantCapacity: 20, wantAfterEarn: 1, wantFloorPerMin: 0},
		{name: "infinite floor", ratio: 0.1, floor: inf, capacity: 20, wantCapacity: 20, wantAfterEarn: 1, wantFloorPerMin: 60_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := retry.NewBudget(tt.ratio, tt.floor, tt.capacity)
			st := b.Stats()
			require.Equal(t, tt.wantCapacity, st.Capacity)
			require.Equal(t, tt.wantCapacity, st.Tokens, "starts full")
			if tt.wantCapacity == 1e9 {
				return // too many tokens to drain here
			}

			// Drain the bucket at one instant: the floor allows at most its
			// burst (every retry when it is infinite), so bound the loop.
			for i := 0; b.Stats().Tokens >= 1; i++ {
				require.True(t, b.AllowRetry(budgetEpoch))
				require.Less(t, i, 1000)
			}
			for range 10 {
				b.Succeeded()
			}
			assert.InDelta(t, tt.wantAfterEarn, b.Stats().Tokens, 1e-9)

			// Empty the bucket again, then count the floor's grants over a
			// minute, one ask per millisecond, the first a minute later.
			start := budgetEpoch.Add(time.Minute)
			for b.Stats().Tokens >= 1 {
				b.AllowRetry(budgetEpoch)
			}
			before := b.Stats().FloorAllowed
			for ms := range 60_000 {
				b.AllowRetry(start.Add(time.Duration(ms) * time.Millisecond))
			}
			assert.Equal(t, tt.wantFloorPerMin, b.Stats().FloorAllowed-before)
		})
	}
}

func TestBudgetStatsCountersExact(t *testing.T) {
	t.Parallel()
	b := retry.NewBudget(0.5, 1, 2)
	for range 3 {
		b.Requested()
	}
	assert.True(t, b.AllowRetry(budgetEpoch), "token 1 of 2")
	assert.True(t, b.AllowRetry(budgetEpoch), "token 2 of 2")
	assert.True(t, b.AllowRetry(budgetEpoch), "the floor's burst")
	assert.False(t, b.AllowRetry(budgetEpoch), "empty")
	for range 3 {
		b.Succeeded()
	}
	assert.True(t, b.AllowRetry(budgetEpoch), "1.5 tokens earned")
	assert.False(t, b.AllowRetry(budgetEpoch.Add(500*time.Millisecond)), "0.5 token left, floor not due")
	assert.True(t, b.AllowRetry(budgetEpoch.Add(time.Second)), "floor due")

	want := retry.BudgetStats{
		Tokens:         0.5,
		Capacity:       2,
		Requests:       3,
		Successes:      3,
		RetriesAllowed: 5,
		FloorAllowed:   2,
		RetriesDenied:  2,
	}
	st := b.Stats()
	assert.Equal(t, want, st)
	assert.Equal(t, "tokens=0.5/2 requests=3 successes=3 retries allowed=5 (floor 2) denied=2", st.String())

	for range 100 {
		b.Succeeded()
	}
	assert.Equal(t, 2.0, b.Stats().Tokens, "capped at the capacity")
}

func TestDefaultBudget(t *testing.T) {
	t.Parallel()
	const capacity = retry.DefaultBudgetCapacity
	a, b := retry.NewDefaultBudget(), retry.NewDefaultBudget()
	require.NotSame(t, a, b)
	assert.Equal(t, retry.BudgetStats{Tokens: capacity, Capacity: capacity}, a.Stats())
	for range int(capacity) {
		assert.True(t, a.AllowRetry(budgetEpoch))
	}
	assert.Equal(t, capacity, b.Stats().Tokens, "budgets are independent")
	assert.True(t, a.AllowRetry(budgetEpoch), "floor")
	assert.False(t, a.AllowRetry(budgetEpoch.Add(999*time.Millisecond)))
	assert.True(t, a.AllowRetry(budgetEpoch.Add(time.Second)))
	for range 10 {
		a.Succeeded()
	}
	assert.InDelta(t, 10*retry.DefaultBudgetRatio, a.Stats().Tokens, 1e-9)
}

func TestBudgetHotPathDoesNotAllocate(t *testing.T) {
	b := retry.NewBudget(0.1, 1, 1e9)
	empty := retry.NewBudget(0.1, 0, 1)
	empty.AllowRetry(budgetEpoch)
	floor := retry.NewBudget(0, 1, 1)
	now := budgetEpoch
	tests := map[string]func(){
		"Succeeded":          b.Succeeded,
		"Requested":          b.Requested,
		"AllowRetry":         func() { b.AllowRetry(now) },
		"AllowRetry denied":  func() { empty.AllowRetry(now) },
		"AllowRetry floor":   func() { now = now.Add(time.Second); floor.AllowRetry(now) },
		"Stats":              func() { _ = b.Stats() },
		"nil AllowRetry":     func() { (*retry.Budget)(nil).AllowRetry(now) },
		"Succeeded not full": func() { b.AllowRetry(now); b.Succeeded() },
	}
	for name, fn := range tests {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}

// ExampleNewBudget shows a small budget through a short outage and recovery.
func ExampleNewBudget() {
	// Earn 0.1 token per success, hold at most 2, and allow 1 retry per
	// second when empty.
	b := retry.NewBudget(0.1, 1, 2)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // from the caller's clock

	// An outage: two tokens, then the floor's one retry, then no more.
	fmt.Println(b.AllowRetry(now), b.AllowRetry(now), b.AllowRetry(now), b.AllowRetry(now))
	// A second later the floor allows one more.
	fmt.Println(b.AllowRetry(now.Add(time.Second)))

	// Recovery: ten successes earn one token.
	for range 10 {
		b.Succeeded()
	}
	fmt.Println(b.AllowRetry(now.Add(time.Second)))
	fmt.Println(b.Stats())
	// Output:
	// true true true false
	// true
	// true
	// tokens=0/2 requests=0 successes=10 retries allowed=5 (floor 2) denied=1
}
