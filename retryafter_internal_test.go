package retry

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"Wed, 02 Dec 2026 09:00:05 GMT", 5 * time.Second, true}, // IMF-fixdate
		{"Wednesday, 02-Dec-26 09:01:00 GMT", time.Minute, true}, // RFC 850
		{"Wed Dec  2 09:00:30 2026", 30 * time.Second, true},     // asctime
		{"Wed, 02 Dec 2026 08:59:00 GMT", 0, false},              // past
		{"Wed, 02 Dec 2026 09:00:00 GMT", 0, false},              // now
		{"-5", 0, false},   // negative
		{"1.5", 0, false},  // not an integer
		{"", 0, false},     //
		{"soon", 0, false}, // garbage
		{"99999999999999999999999", math.MaxInt64, true}, // clamped
		{strconv.FormatInt(math.MaxInt64/int64(time.Second)+1, 10), math.MaxInt64, true},
	}
	for _, tt := range tests {
		d, ok := parseRetryAfter(tt.in, now)
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		assert.Equal(t, tt.want, d, "%q", tt.in)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "3600", "-1", "Wed, 02 Dec 2026 09:00:05 GMT", "Wed Dec  2 09:00:30 2026", "x", "", "1e3", " 7 "} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseRetryAfter(s, now)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, false: a rejected value must be 0", s, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v: negative", s, d)
		}
	})
}
