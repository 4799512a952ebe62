package opsui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// redacted stands for a value the page never shows.
const redacted = "[redacted]"

// maxShown is the longest step result or reason shown, in bytes.
const maxShown = 240

// safeHeaders are the response header fields whose values are shown; every
// other field shows its name only.
var safeHeaders = []string{
	"Cache-Control", "Content-Encoding", "Content-Language", "Content-Length", "Content-Type",
	"Date", "Etag", "Idempotent-Replayed", "Last-Modified", "Retry-After", "Vary",
}

// secretName matches the names of fields that hold credentials.
var secretName = regexp.MustCompile(`(?i)(pass(word|wd)?|secret|token|authori[sz]ation|api[-_]?key|cookie|session|credential|card|cvc|cvv|iban|ssn|private|^pan$)`)

// secretText matches credentials inside free text: bearer and basic
// credentials, key=value pairs with a secret name, API keys in the
// usual prefixed forms, JWTs, and long digit runs (card numbers).
var secretText = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b(bearer|basic|digest|token)\s+[A-Za-z0-9._~+/=-]+`),
	regexp.MustCompile(`(?i)\b([A-Za-z_-]*(pass(word|wd)?|secret|token|api[-_]?key|auth)[A-Za-z_-]*)\s*[=:]\s*"?[^\s"&,;]+`),
	regexp.MustCompile(`\b(sk|pk|rk)_(live|test)_[A-Za-z0-9]+`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`),
	regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`),
}

// redactText hides the credentials in free text (an error, a reason) and
// cuts it to maxShown bytes.
func redactText(s string) string {
	for _, re := range secretText {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			// Keep the name of a key=value pair, hide the value.
			if i := strings.IndexAny(m, "=:"); i > 0 && re == secretText[1] {
				return m[:i+1] + redacted
			}
			if i := strings.IndexAny(m, " \t"); i > 0 && re == secretText[0] {
				return m[:i+1] + redacted
			}
			return redacted
		})
	}
	return cut(s)
}

// redactData shows a step's result: JSON with the values of secret-named
// fields hidden, short text with its credentials hidden, and anything
// else (binary data) as its size only.
func redactData(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		out, err := json.Marshal(redactJSON(v))
		if err == nil {
			return cut(redactText(string(out)))
		}
	}
	if utf8.Valid(b) && printable(string(b)) {
		return redactText(string(b))
	}
	return fmt.Sprintf("[%d bytes of binary data]", len(b))
}

// redactJSON hides the values of secret-named fields, at any depth.
func redactJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if secretName.MatchString(k) {
				v[k] = redacted
			} else {
				v[k] = redactJSON(x)
			}
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = redactJSON(x)
		}
		return v
	default:
		return v
	}
}

// redactHeader lists the fields of h, sorted, with the values of the
// fields not in safeHeaders hidden.
func redactHeader(h http.Header) []Field {
	var out []Field
	for name, values := range h {
		value := redacted
		if slices.Contains(safeHeaders, http.CanonicalHeaderKey(name)) {
			value = cut(strings.Join(values, ", "))
		}
		out = append(out, Field{Name: name, Value: value})
	}
	slices.SortFunc(out, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Field is one header field as shown.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// body shows a body as its size only.
func body(b []byte) string {
	if len(b) == 0 {
		return "empty"
	}
	return fmt.Sprintf("%s (%d bytes)", redacted, len(b))
}

// cut shortens s to maxShown bytes, on a rune boundary.
func cut(s string) string {
	if len(s) <= maxShown {
		return s
	}
	i := maxShown
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
