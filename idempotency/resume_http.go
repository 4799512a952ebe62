package idempotency

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
)

// neverStored are the headers WithResume refuses to store: credentials.
var neverStored = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// WithResume, for the Middleware, lets a Reconciler finish a request whose execution stalled
// when its client does not retry. The Middleware stores each keyed request
// with its record (the method, the host, the path and query, the headers
// named here, and the body within the request limit) until the record
// completes, and registers its handler with the Runner under name (one
// name per Middleware of a Runner). A Reconciler serves a stalled request
// again through this Middleware's handler, as the same caller with the same
// key (FromContext(r.Context()).Caller()), and stores the response as if
// the client had retried: a client that comes back gets it byte for byte.
// Only executions that began (MarkStarted, or a Step) are resumed, so the
// handler should mark the start before its first effect.
//
// The resumed request has no credentials: Authorization, Proxy-Authorization
// and Cookie are never stored (naming them panics), and the caller function does
// not run again. A handler that authorizes from credentials should read the
// caller of a resumed request (Execution.Resumed) from the Execution. The
// stored request lives with its record (its TTL, Sweep) and is read only
// with it, under its caller's key.
func WithResume(name string, headers ...string) Option {
	keep := make([]string, 0, len(headers))
	for _, h := range headers {
		h = textproto.CanonicalMIMEHeaderKey(h)
		for _, never := range neverStored {
			if h == never {
				panic("idempotency: WithResume never stores the " + never + " header")
			}
		}
		keep = append(keep, h)
	}
	return middlewareOption(func(m *middleware) {
		if name == "" {
			panic("idempotency: WithResume needs a name")
		}
		m.resume, m.resumeHeaders = name, keep
	})
}

// storedRequestVersion is the first byte of a stored request.
const storedRequestVersion = 1

// encodeRequest encodes what serving r again needs: a version byte, then
// the method, host, request URI, and the kept headers (a count, then names
// and values), each preceded by its length as a uvarint, then the body.
func encodeRequest(r *http.Request, headers []string, body []byte) []byte {
	// The request-target as it came (a server's request has it): the URL
	// made from it does not always give it back (an opaque "a:b" gives "b").
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	n := 1 + 4*binary.MaxVarintLen64 + len(r.Method) + len(r.Host) + len(uri) + len(body)
	b := make([]byte, 0, n)
	b = append(b, storedRequestVersion)
	for _, s := range [...]string{r.Method, r.Host, uri} {
		b = appendField(b, s)
	}
	count := 0
	for _, h := range headers {
		count += len(r.Header[h])
	}
	b = binary.AppendUvarint(b, uint64(count))
	for _, h := range headers {
		for _, v := range r.Header[h] {
			b = appendField(appendField(b, h), v)
		}
	}
	return append(b, body...)
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBadStoredRequest = errors.New("idempotency: malformed stored request")

// decodeRequest rebuilds the request encodeRequest stored, with ctx.
func decodeRequest(ctx context.Context, b []byte) (*http.Request, []byte, error) {
	if len(b) == 0 || b[0] != storedRequestVersion {
		return nil, nil, errBadStoredRequest
	}
	b = b[1:]
	var fields [3]string
	for i := range fields {
		f, rest, ok := cutField(b)
		if !ok {
			return nil, nil, errBadStoredRequest
		}
		fields[i], b = string(f), rest
	}
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(len(b)) {
		return nil, nil, errBadStoredRequest
	}
	b = b[k:]
	header := make(http.Header, count)
	for range count {
		name, rest, ok := cutField(b)
		if !ok {
			return nil, nil, errBadStoredRequest
		}
		value, rest, ok := cutField(rest)
		if !ok {
			return nil, nil, errBadStoredRequest
		}
		header[string(name)] = append(header[string(name)], string(value))
		b = rest
	}
	u, err := url.ParseRequestURI(fields[2])
	// An opaque URI ("a:b") is no request's: its RequestURI is not itself,
	// and serving it again would serve another request.
	if err != nil || u.Opaque != "" || fields[0] == "" || strings.ContainsAny(fields[0], " \t\r\n") {
		return nil, nil, errBadStoredRequest
	}
	r := (&http.Request{
		Method: fields[0], URL: u, Host: fields[1], RequestURI: fields[2],
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: http.NoBody, ContentLength: int64(len(b)),
	}).WithContext(ctx)
	if len(b) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return r, b, nil
}

// resume is the Work a Reconciler resumes a stored request with: it serves
// the request again to the handler, recording the response as ServeHTTP
// would. A panic is stored as a 500 (as ServeHTTP stores it) and not raised
// again: there is no server to log it, so it is logged with the outcome.
func (h *handler) resume(ctx context.Context, e *Execution) ([]byte, error) {
	r, body, err := decodeRequest(ctx, e.Input())
	if err != nil {
		return nil, Abort(problemResponse(http.StatusInternalServerError, codeStoreFailed,
			"The stored request is unreadable; it will not be executed again."), err)
	}
	r.Header.Set(h.m.header, FormatKey(e.Key()))
	rec := newRecorder(discard{}, h.m.maxResponse)
	defer rec.release()
	rec.next, rec.req, rec.reqBody = h.next, r, body
	out, err := rec.run(ctx, e)
	if rec.panicked {
		err = errors.Join(err, errHandlerPanicked)
	}
	return bytes.Clone(out), err
}

// discard is the client of a resumed request: nobody waits for it.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}
