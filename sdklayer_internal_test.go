package retry

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseAmzSDKRequest(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n, m int
		ok   bool
	}{
		{"attempt=1; max=3", 1, 3, true},
		{"attempt=2;max=3; ttl=20261202T090000Z", 2, 3, true},
		{"max=4; attempt=4", 4, 4, true},
		{"attempt=1", 1, 0, true},
		{"attempt=x; max=3", 0, 3, false},
		{"", 0, 0, false},
		{"attempt=0; max=0", 0, 0, false},
	} {
		n, m, ok := parseAmzSDKRequest(tc.in)
		assert.Equal(t, []any{tc.n, tc.m, tc.ok}, []any{n, m, ok}, tc.in)
	}
}

func TestSDKHeadersCostNoAllocation(t *testing.T) {
	h := http.Header{"Accept": {"*/*"}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { sdkAttempts(h, 4) }))
	h = http.Header{"Amz-Sdk-Request": {"attempt=3; max=3"}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { sdkAttempts(h, 4) }))
	assert.Equal(t, 2, sdkAttempts(h, 4))
}
