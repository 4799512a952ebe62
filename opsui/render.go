package opsui

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed templates/style.css
var styleCSS []byte

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"ago": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	// act is the address an action's form posts to: the execution is in
	// its query, percent-encoded, so that any key goes back byte for byte
	// (a form field's value would lose a NUL, a carriage return or bytes
	// that are not UTF-8 on its way through the browser).
	"act": func(base, action, caller, key string) string {
		return base + "/execution/" + action + "?" + url.Values{"caller": {caller}, "key": {key}}.Encode()
	},
	"maxKey": func() int { return maxKey },
}).ParseFS(templateFS, "templates/*.html"))

// page is what the layout renders around a page's data.
type page struct {
	Title string
	Base  string
	// Done names the action just done, from the redirect after it.
	Done string
	Data any
}

// wantJSON reports whether r asks for the JSON twin: ?format=json, or an
// Accept header preferring application/json to HTML.
func wantJSON(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "json":
		return true
	case "html":
		return false
	}
	accept := r.Header.Get("Accept")
	j := strings.Index(accept, "application/json")
	if j < 0 {
		j = strings.Index(accept, "application/problem+json")
	}
	html := strings.Index(accept, "text/html")
	return j >= 0 && (html < 0 || j < html)
}

// checkFormat refuses a format other than json and html.
func checkFormat(r *http.Request) error {
	switch r.URL.Query().Get("format") {
	case "", "json", "html":
		return nil
	}
	return problem(http.StatusBadRequest, CodeBadQuery, "format must be json or html")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// render answers data as JSON or as the HTML page name.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) error {
	if wantJSON(r) {
		writeJSON(w, status, data)
		return nil
	}
	done := r.URL.Query().Get("done")
	switch done {
	case "retry", "discard", "resume":
	default:
		done = ""
	}
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, page{Title: title, Base: h.base, Done: done, Data: data}); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
	return nil
}

// fail answers err: a Problem as problem JSON, or as an HTML page for a
// browser (one that accepts text/html and did not ask for JSON); any
// other error as a 500 that shows nothing of it.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var pe *problemError
	if !errors.As(err, &pe) {
		pe = problem(http.StatusInternalServerError, "internal", "the page failed")
	}
	if wantJSON(r) || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		writeProblem(w, pe.p)
		return
	}
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, "problem", page{Title: pe.p.Title, Base: h.base, Data: pe.p}); err != nil {
		writeProblem(w, pe.p)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(pe.p.Status)
	_, _ = w.Write(b.Bytes())
}
