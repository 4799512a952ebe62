package opsui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

// maxNested is how many levels of JSON kept as a string (a step result
// holding an HTTP answer whose body is JSON, and so on) are opened to
// redact what they hold.
const maxNested = 4

// maxNestedBytes bounds the bytes of strings opened as JSON for one step
// result, so that a hostile result costs time and memory linear in its
// size, however it nests.
const maxNestedBytes = 256 << 10

// redactData shows a step's result: JSON with the values of secret-named
// fields hidden (in JSON kept as a string inside it too), short text with
// its credentials hidden, and anything else (binary data) as its size
// only.
func redactData(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if out, ok := redactJSONData(b); ok {
		return cut(redactText(out))
	}
	if utf8.Valid(b) && printable(string(b)) {
		return redactText(string(b))
	}
	return fmt.Sprintf("[%d bytes of binary data]", len(b))
}

// redactJSONData returns b, JSON, with the values of its secret-named
// fields hidden; false if b is not JSON.
func redactJSONData(b []byte) (string, bool) {
	v, ok := decodeJSON(b)
	if !ok {
		return "", false
	}
	r := redactor{budget: maxNestedBytes}
	return encodeJSON(r.redact(v, 0))
}

// decodeJSON decodes b, one JSON value and nothing after it, keeping
// numbers as written.
func decodeJSON(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// encodeJSON encodes v compactly, without escaping HTML (the page's
// template and the JSON twin's encoder do).
func encodeJSON(v any) (string, bool) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// redactor hides the values of secret-named fields, at any depth, within
// a budget of bytes of nested JSON it may open.
type redactor struct{ budget int }

// redact hides the secrets of v, a value level strings deep.
func (r *redactor) redact(v any, level int) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if secretName.MatchString(k) {
				v[k] = redacted
			} else {
				v[k] = r.redact(x, level)
			}
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = r.redact(x, level)
		}
		return v
	case string:
		return r.nested(v, level)
	default:
		return v
	}
}

// nested redacts a string that holds a JSON object or array: decoded,
// redacted and encoded again. One that is too deep or too large to open
// is hidden whole; any other string is kept.
func (r *redactor) nested(s string, level int) string {
	t := strings.TrimLeft(s, " \t\r\n")
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return s
	}
	if level >= maxNested || len(s) > r.budget {
		return redacted
	}
	r.budget -= len(s)
	v, ok := decodeJSON([]byte(s))
	if !ok {
		return s
	}
	out, ok := encodeJSON(r.redact(v, level+1))
	if !ok {
		return redacted
	}
	return out
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
