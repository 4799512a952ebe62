package retry

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// parseRetryAfter reads an HTTP Retry-After value as a wait from now: either
// delta-seconds ("120") or an HTTP-date in any of the three forms
// http.ParseTime accepts (IMF-fixdate, RFC 850, asctime). It reports false
// for garbage, negative numbers and dates not after now, which callers
// ignore. Seconds too large for a time.Duration are clamped to the largest
// one (so they always exceed any cap).
func parseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const maxSeconds = math.MaxInt64 / int64(time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs > maxSeconds {
				return math.MaxInt64, true
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}
