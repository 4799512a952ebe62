package opsui

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// A step result shows as at most maxShown bytes of valid UTF-8, and a
// secret-named field never shows, however deep in JSON kept as strings
// it lies.
func FuzzRedactData(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `[]`, `"x"`, `{"a":"{\"password\":\"p\"}"}`, `"[\"{\\\"token\\\":1}\"]"`, `{"body":"{ not json"}`,
		`[1e999]`, `{"n":12345678901234567890}`, "\xff\xfe", `Bearer abc.def`, strings.Repeat(`[`, 5000),
		`{"a":"` + strings.Repeat(`[`, 300) + `"}`,
	} {
		f.Add([]byte(s), uint8(2))
	}
	const marker = "S3CR3T-MARKER"
	f.Fuzz(func(t *testing.T, data []byte, levels uint8) {
		out := redactData(data)
		if len(out) > maxShown+len("…") || !utf8.ValidString(out) {
			t.Fatalf("redactData(%q) = %q: too long or not UTF-8", data, out)
		}
		if len(data) > 1<<10 || strings.Contains(string(data), "S3CR3T") {
			return
		}
		// The secret beside the input, then wrapped in strings.
		var v any = map[string]any{"other": string(data), "client_secret": marker}
		if j, ok := decodeJSON(data); ok {
			v = []any{j, map[string]any{"password": marker}}
		}
		for range levels % (maxNested + 3) {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			v = map[string]any{"status": 200, "body": string(b)}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out, ok := redactJSONData(b)
		if !ok || strings.Contains(out, "S3CR3T") {
			t.Fatalf("redactJSONData(%s) = %s, %v: shows the secret", b, out, ok)
		}
	})
}
