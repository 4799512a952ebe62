package otelretry

import (
	"net/url"
	"strings"
	"testing"
)

// redactQuery keeps every parameter of a query as it is, in its place, but
// for the value of a sensitive one, which becomes REDACTED; redacting again
// changes nothing.
func FuzzRedactQuery(f *testing.F) {
	for _, seed := range []string{
		"", "a=1", "sig=abc&color=blue", "X-Amz-Signature=x;X-Amz-Credential=y", "sig", "sig=", "=x",
		"SIG=1&%73ig=2", "a=1&&b=2;;", "access_token=ya29%2Ex&limit=3", "%zz=1&sig=%zz",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := redactQuery(raw)
		in, out := params(raw), params(got)
		if len(in) != len(out) {
			t.Fatalf("redactQuery(%q) = %q: %d parameters became %d", raw, got, len(in), len(out))
		}
		for i := range in {
			name, _, hasValue := strings.Cut(in[i], "=")
			switch {
			case hasValue && sensitive(name):
				if out[i] != name+"="+redacted {
					t.Fatalf("redactQuery(%q) = %q: sensitive %q became %q", raw, got, in[i], out[i])
				}
			case out[i] != in[i]:
				t.Fatalf("redactQuery(%q) = %q: %q became %q", raw, got, in[i], out[i])
			}
		}
		if again := redactQuery(got); again != got {
			t.Fatalf("redactQuery is not idempotent: %q, then %q", got, again)
		}
	})
}

// params splits a raw query at '&' and ';', empty parameters included.
func params(raw string) []string {
	if raw == "" {
		return nil
	}
	var out []string
	for {
		i := strings.IndexAny(raw, "&;")
		if i < 0 {
			return append(out, raw)
		}
		out = append(out, raw[:i])
		raw = raw[i+1:]
	}
}

// fullURL never keeps user information, whatever the URL.
func FuzzFullURL(f *testing.F) {
	for _, seed := range []string{
		"http://user:pass@host/p?q=1#f", "https://tok@host", "http://host/?sig=x", "mailto:a@b", "/relative?sig=1",
		"http://%75ser:p%40ss@host:8080/a%2Fb?X-Amz-Signature=1&a=%zz",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		got := fullURL(u)
		back, err := url.Parse(got)
		if err != nil {
			return // the URL did not round-trip to begin with
		}
		if u.User != nil {
			if p, _ := back.User.Password(); back.User == nil || back.User.Username() != redacted || p != redacted {
				t.Fatalf("fullURL(%q) = %q keeps user information", raw, got)
			}
		}
	})
}
