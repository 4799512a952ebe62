package idempotency_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 255)
	for field, want := range map[string]string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`8e03978e-40d5-43e8-bc93-6894a57f9324`:   "8e03978e-40d5-43e8-bc93-6894a57f9324",
		" \t\"abc\" ":                            "abc",
		`"a\"b\\c"`:                              `a"b\c`,
		`"a,b"`:                                  "a,b",
		`a;b=c`:                                  "a;b=c",
		long:                                     long,
		`"` + long + `"`:                         long,
		`"` + strings.Repeat(`\\`, 255) + `"`:    strings.Repeat(`\`, 255),
	} {
		got, err := idempotency.ParseKey(field)
		require.NoError(t, err, field)
		assert.Equal(t, want, got, field)
	}
	for _, field := range []string{
		"", " ", `""`, long + "a", `"` + long + `a"`, `"` + strings.Repeat(`\\`, 256) + `"`,
		"a b", `"a b"`, "a\x00", "\x7f", "é", `"é"`, `"abc`, `"abc"x`, `"abc";p=1`, `"a\b"`, `"a\`,
		`a"b`, `a\b`, "a,b", `"a", "b"`, `"`,
	} {
		_, err := idempotency.ParseKey(field)
		assert.Error(t, err, "%q", field)
	}
}

func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "plain-token", `"a\"b\\c"`, `""`, `"abc`,
		`"a", "b"`, " \"x\" ", "a\x00b", strings.Repeat("k", 256), `"abc";p=1`, `"\`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, field string) {
		key, err := idempotency.ParseKey(field)
		if err != nil {
			if key != "" {
				t.Fatalf("ParseKey(%q) = %q with error %v", field, key, err)
			}
			return
		}
		if len(key) == 0 || len(key) > 255 {
			t.Fatalf("ParseKey(%q) = %q: length %d", field, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x is not visible ASCII", field, key, key[i])
			}
		}
		// The quoted form round-trips.
		again, err := idempotency.ParseKey(idempotency.FormatKey(key))
		if err != nil || again != key {
			t.Fatalf("ParseKey(FormatKey(%q)) = %q, %v", key, again, err)
		}
		// A key parsed from the plain form is the field itself, trimmed.
		if !strings.HasPrefix(strings.TrimLeft(field, " \t"), `"`) && key != strings.Trim(field, " \t") {
			t.Fatalf("plain ParseKey(%q) = %q", field, key)
		}
	})
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	fp := idempotency.Fingerprint("POST", "/orders", "b=2&a=1&a=0", []byte("body"))
	require.True(t, strings.HasPrefix(fp, "v1"+":"))
	assert.Len(t, fp, len("v1:")+64)
	assert.Equal(t, fp, idempotency.Fingerprint("POST", "/orders", "a=1&a=0&b=2", []byte("body")))
	for _, other := range []string{
		idempotency.Fingerprint("PUT", "/orders", "b=2&a=1&a=0", []byte("body")),
		idempotency.Fingerprint("POST", "/orders/", "b=2&a=1&a=0", []byte("body")),
		idempotency.Fingerprint("POST", "/orders", "b=2&a=0&a=1", []byte("body")),
		idempotency.Fingerprint("POST", "/orders", "b=2&a=1&a=0", []byte("body!")),
		// Field boundaries count: moving bytes between fields changes it.
		idempotency.Fingerprint("POS", "T/orders", "b=2&a=1&a=0", []byte("body")),
	} {
		assert.NotEqual(t, fp, other)
	}
	// A query that does not parse is taken as it is.
	assert.NotEqual(t, idempotency.Fingerprint("POST", "/", "a=%zz", nil), idempotency.Fingerprint("POST", "/", "a=%yy", nil))
}
