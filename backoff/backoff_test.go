package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/exactlyonce/retry/backoff"
)

func TestBackoffExactValues(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		b     backoff.Backoff
		retry int
		prev  time.Duration
		u     float64
		want  time.Duration
	}{
		{"full jitter first", backoff.FullJitter(100*ms, 10*time.Second), 1, 0, 0.5, 50 * ms},
		{"full jitter third", backoff.FullJitter(100*ms, 10*time.Second), 3, 0, 0.25, 100 * ms},
		{"full jitter capped", backoff.FullJitter(100*ms, time.Second), 10, 0, 0.5, 500 * ms},
		{"full jitter u=0", backoff.FullJitter(100*ms, time.Second), 2, 0, 0, 0},
		{"equal jitter low", backoff.EqualJitter(100*ms, time.Second), 2, 0, 0, 100 * ms},
		{"equal jitter high", backoff.EqualJitter(100*ms, time.Second), 2, 0, 0.5, 150 * ms},
		{"decorrelated first", backoff.DecorrelatedJitter(100*ms, time.Second), 1, 0, 0.5, 200 * ms},
		{"decorrelated grows from prev", backoff.DecorrelatedJitter(100*ms, time.Second), 2, 200 * ms, 0.5, 350 * ms},
		{"decorrelated capped", backoff.DecorrelatedJitter(100*ms, time.Second), 9, 900 * ms, 0.99, 991 * ms},
		{"constant", backoff.Constant(70 * ms), 5, 0, 0.9, 70 * ms},
		{"func", backoff.Func(func(n int, _ time.Duration, _ float64) time.Duration { return time.Duration(n) * ms }), 7, 0, 0, 7 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.b.Delay(tt.retry, tt.prev, tt.u))
		})
	}
}

func TestBackoffNeverOverflowsOrGoesNegative(t *testing.T) {
	strategies := map[string]backoff.Backoff{
		"full":         backoff.FullJitter(time.Hour, math.MaxInt64),
		"equal":        backoff.EqualJitter(time.Second, math.MaxInt64),
		"decorrelated": backoff.DecorrelatedJitter(time.Second, math.MaxInt64),
		"small cap":    backoff.FullJitter(time.Millisecond, 5*time.Millisecond),
	}
	retries := []int{math.MinInt, -1, 0, 1, 2, 30, 62, 63, 64, 65, 1000, math.MaxInt32, math.MaxInt}
	prevs := []time.Duration{math.MinInt64, -1, 0, time.Second, math.MaxInt64 / 2, math.MaxInt64}
	us := []float64{math.Inf(-1), -1, 0, 0.5, math.Nextafter(1, 0), 1, 2, math.Inf(1), math.NaN()}
	for name, b := range strategies {
		for _, n := range retries {
			for _, p := range prevs {
				for _, u := range us {
					d := b.Delay(n, p, u)
					if d < 0 {
						t.Fatalf("%s: Delay(%d, %v, %v) = %v, negative", name, n, p, u, d)
					}
				}
			}
		}
	}
	// Exponential growth stops at the cap, however large the retry number.
	b := backoff.FullJitter(time.Second, time.Minute)
	assert.Equal(t, time.Duration(float64(time.Minute)*0.5), b.Delay(math.MaxInt, 0, 0.5))
	assert.Equal(t, time.Duration(float64(time.Second)*0.5), b.Delay(math.MinInt, 0, 0.5), "retry < 1 counts as 1")
}

func TestBackoffClamps(t *testing.T) {
	// base <= 0 is raised to 1 ms; a cap below base is raised to base.
	assert.Equal(t, 500*time.Microsecond, backoff.FullJitter(0, 0).Delay(1, 0, 0.5))
	assert.Equal(t, 500*time.Microsecond, backoff.FullJitter(-time.Second, 0).Delay(5, 0, 0.5))
	assert.Equal(t, 50*time.Millisecond, backoff.FullJitter(100*time.Millisecond, time.Millisecond).Delay(3, 0, 0.5))
	assert.Equal(t, 100*time.Millisecond, backoff.DecorrelatedJitter(100*time.Millisecond, 0).Delay(4, time.Hour, 0.9))
	assert.Zero(t, backoff.Constant(-time.Second).Delay(1, 0, 0))
}

func FuzzBackoffNeverNegativeOrAboveCap(f *testing.F) {
	f.Add(int64(time.Millisecond), int64(time.Second), 3, int64(0), 0.5)
	f.Add(int64(0), int64(-1), math.MaxInt, int64(math.MaxInt64), 0.99)
	f.Fuzz(func(t *testing.T, base, ceiling int64, n int, prev int64, u float64) {
		b, c := time.Duration(base), time.Duration(ceiling)
		limit := max(c, b, time.Millisecond)
		for name, s := range map[string]backoff.Backoff{
			"full": backoff.FullJitter(b, c), "equal": backoff.EqualJitter(b, c), "decorrelated": backoff.DecorrelatedJitter(b, c),
		} {
			d := s.Delay(n, time.Duration(prev), u)
			if d < 0 || d > limit {
				t.Fatalf("%s(%v, %v).Delay(%d, %v, %v) = %v, outside [0, %v]", name, b, c, n, time.Duration(prev), u, d, limit)
			}
		}
	})
}
