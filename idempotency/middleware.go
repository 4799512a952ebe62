package idempotency

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"strconv"
	"time"
)

// Default limits of the Middleware.
const (
	// defaultMaxRequestBody is the largest request body fingerprinted (1 MiB).
	defaultMaxRequestBody = 1 << 20
	// defaultMaxResponseBody is the largest response body stored (1 MiB).
	defaultMaxResponseBody = 1 << 20
	// defaultMaxResponseHeader is the room for the rest of a stored
	// response (64 KiB): its status and header, as stored, and a few bytes
	// of framing. With the defaults no record holds more than 1 MiB + 64 KiB
	// of response.
	defaultMaxResponseHeader = 64 << 10
)

// SingleTenant is the caller function of the Middleware for a service with
// one caller: every request
// shares one key space. Use it only when no two clients can see each other's
// keys.
func SingleTenant(*http.Request) (string, error) { return "", nil }

// WithKeyHeader, for the Middleware, sets the header carrying the key
// (default "Idempotency-Key").
func WithKeyHeader(name string) Option {
	return middlewareOption(func(m *middleware) {
		if name != "" {
			m.header = textproto.CanonicalMIMEHeaderKey(name)
		}
	})
}

// WithRequiredMethods, for the Middleware, sets the methods whose requests must carry a key
// (default POST and PATCH); without one they get 400. Requests with another
// unsafe method (PUT, DELETE, ...) are deduplicated when they carry a key and
// pass through otherwise. Safe methods (GET, HEAD, OPTIONS, TRACE) always pass
// through untouched.
func WithRequiredMethods(methods ...string) Option {
	return middlewareOption(func(m *middleware) {
		m.required = make(map[string]bool, len(methods))
		for _, method := range methods {
			m.required[method] = true
		}
	})
}

// WithMaxRequestBody, for the Middleware, sets the largest request body the Middleware reads to
// fingerprint (default 1 MiB). A larger body gets 413 and the
// handler does not run. Values <= 0 are ignored.
func WithMaxRequestBody(n int64) Option {
	return middlewareOption(func(m *middleware) {
		if n > 0 {
			m.maxRequest = n
		}
	})
}

// WithMaxResponseBody, for the Middleware, sets the largest response body stored (default
// 1 MiB). The status and header have a room of their own
// (WithMaxResponseHeader). See Middleware for what happens to a larger
// response. Values <= 0 are ignored.
func WithMaxResponseBody(n int) Option {
	return middlewareOption(func(m *middleware) {
		if n > 0 {
			m.maxResponse.body = n
		}
	})
}

// WithMaxResponseHeader, for the Middleware, sets the room for what is stored of a response
// besides its body (default 64 KiB): the status and the
// header, as stored, and a few bytes of framing. A response whose header
// does not fit is too large, like one whose body does not, so that no
// record holds more than the two limits together. Values <= 0 are ignored.
func WithMaxResponseHeader(n int) Option {
	return middlewareOption(func(m *middleware) {
		if n > 0 {
			m.maxResponse.head = n
		}
	})
}

type middleware struct {
	runner      *Runner
	caller      func(r *http.Request) (string, error)
	header      string
	required    map[string]bool
	maxRequest  int64
	maxResponse responseLimit
	// resume names the handler for a Reconciler, and resumeHeaders are
	// the request headers stored for it (WithResume).
	resume        string
	resumeHeaders []string
	// jsonKey is the JSON Pointer of the key in the body, split into its
	// tokens (WithKeyFromJSON), or nil.
	jsonKey []string
}

// Middleware returns HTTP middleware that runs each keyed request's handler at
// most once per (caller, key) with r and replays its stored response to every
// repeat. The key comes from the Idempotency-Key header (see ParseKey), the
// caller from caller (required: it keeps tenants apart; it returns the
// authenticated principal or tenant that scopes the request's keys, and its
// error gets a 401 problem response, the handler not run; SingleTenant for
// one key space), the fingerprint from
// Fingerprint over the method, escaped path, query and body; lease and TTL are
// r's.
//
// Responses (errors are RFC 9457 application/problem+json with a "code"
// member; docs/protocol.md lists the codes):
//
//   - no key on a required method, an empty, over-long (> maxKeyLen) or
//     malformed key, or several header lines: 400;
//   - a body over the request limit: 413; unreadable: 400;
//   - the key used before with another fingerprint: 422;
//   - the key's first request still running: 409 with Retry-After, about
//     as long as requests take here (see InProgressError), never the
//     whole lease; the Retry-After is always there, and is what tells a
//     client (this module's retry.Transport among them) that this 409
//     means "in progress, come back", not a conflict;
//   - the key completed: the stored status, header and body byte for byte,
//     plus "Idempotent-Replayed: true";
//   - every answer given once the request has been read (the
//     handler's, a replay, a 409, a 422, a store failure) echoes the key
//     header as the request sent it: a client learns from it that this
//     server deduplicates keys, so that a request of its that may have
//     reached the server is safe to send again (this module's
//     retry.Transport waits for that before it retries a POST after a reset
//     or a 5xx);
//   - the caller function failed: 401;
//   - a store failure that a retry may get past (a refused connection, a
//     timeout): 503 with Retry-After; one that every retry would meet again
//     (marked retry.Permanent: an input or a limit the store cannot take), or a stored
//     response this package cannot read: 500 without Retry-After.
//
// What is stored: the handler may call MarkStarted(r.Context()) when
// execution begins (before it writes the response header). A 4xx written
// before the mark is a rejection: it is sent but not stored, and the key is
// freed for a corrected retry. Everything else is stored and replayed, 5xx
// included. A handler that never marks has its 4xx treated as rejections and
// everything else stored. Execution.Step marks implicitly.
//
// The response is buffered until the handler returns, then stored, then sent:
// Flush does nothing (streaming is not possible while the outcome must be
// stored first) and Hijack is not supported. As with net/http, the header is
// taken when it is written (WriteHeader, or the first Write): changes to the
// header map after that are neither sent nor stored, and trailers are
// neither. A response is stored when its body fits the body limit
// (WithMaxResponseBody, 1 MiB by default) and its status and header fit the
// header's room (WithMaxResponseHeader, 64 KiB by default), so a record
// holds at most the two together. A rejection larger than that is streamed
// instead. An outcome larger than that is not sent: the transaction
// (with a TxStore) is rolled back and a small 500 problem (code
// response_too_large) is stored and sent instead, because execution began
// and must never run twice. Likewise a panicking handler stores a 500
// problem (code handler_panicked), after a rollback, unless it had already
// written a rejection, which frees the key; the panic is then re-raised, so
// http.Server logs it and the client of that attempt sees a broken connection
// and its retry gets the stored 500.
//
// The handler's ResponseWriter and request body are its own, for this
// request only, and stop working when it returns, as a handler may not use
// them afterwards: a late Write fails with an error, a late Read
// with http.ErrBodyReadAfterClose, and neither ever reaches another request.
//
// The handler's request context (r.Context()) keeps the request's values
// but no longer ends when the client disconnects: once the handler runs, the
// client's connection does not decide the outcome. It ends when the
// execution's lease runs out (its deadline; every recovery point and
// Execution.Extend moves it on), and when the handler returns.
//
// With a TxStore the handler's request context carries the transaction
// (see the store's documentation), committed with the stored response. If a
// statement of that transaction failed (a database error, a context that
// ended, no connection to be had), nothing of it is committed and nothing is
// stored, whatever the handler answered: the key is freed (or, after a
// recovery point, left for the retry to resume), and the client gets 503
// with Retry-After (code transaction_rolled_back), or 500 without it when the
// failure is permanent (retry.Permanent), so that a retry runs cleanly. A
// rejection (a 4xx before MarkStarted) is still sent as it is. Likewise,
// when a step's recovery point could not be saved (Execution.Step), the
// handler's answer is not stored: the client gets 503 with Retry-After (500
// when the store's failure is permanent), and its retry resumes the step.
//
// If this attempt's lease was taken over before it completed (it ran past
// the lease), its outcome is discarded and the client gets 409 (code
// idempotency_lease_lost): a retry gets the newer attempt's outcome.
func Middleware(runner *Runner, caller func(r *http.Request) (string, error), opts ...Option) func(http.Handler) http.Handler {
	if runner == nil || caller == nil {
		panic("idempotency: Middleware needs a Runner and a caller function")
	}
	m := &middleware{
		runner:      runner,
		caller:      caller,
		header:      "Idempotency-Key",
		required:    map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		maxRequest:  defaultMaxRequestBody,
		maxResponse: responseLimit{body: defaultMaxResponseBody, head: defaultMaxResponseHeader},
	}
	for _, o := range opts {
		if o != nil {
			o.applyMiddleware(m)
		}
	}
	return func(next http.Handler) http.Handler {
		h := &handler{m: m, next: next}
		if m.resume != "" {
			runner.Register(m.resume, h.resume)
		}
		if m.jsonKey != nil {
			return &jsonKeyHandler{m: m, next: h}
		}
		return h
	}
}

type handler struct {
	m    *middleware
	next http.Handler
}

var (
	errHandlerPanicked  = errors.New("idempotency: handler panicked")
	errResponseTooLarge = errors.New("idempotency: response too large to store")
	errRejectedResponse = errors.New("idempotency: handler rejected the request")
)

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		h.next.ServeHTTP(w, r)
		return
	}
	values := r.Header[m.header]
	switch {
	case len(values) == 0 && m.required[r.Method]:
		writeProblem(w, http.StatusBadRequest, codeKeyMissing, "This request needs an "+m.header+" header.", 0)
		return
	case len(values) == 0:
		h.next.ServeHTTP(w, r)
		return
	case len(values) > 1:
		writeProblem(w, http.StatusBadRequest, codeKeyInvalid, "Send one "+m.header+" header line.", 0)
		return
	}
	key, err := ParseKey(values[0])
	if err != nil {
		writeProblem(w, http.StatusBadRequest, codeKeyInvalid,
			"The "+m.header+" must be 1 to 255 visible ASCII characters, optionally in double quotes.", 0)
		return
	}
	caller, err := m.caller(r)
	if err != nil {
		writeProblem(w, http.StatusUnauthorized, codeCallerUnknown, "The caller could not be identified.", 0)
		return
	}
	rec := newRecorder(w, m.maxResponse)
	defer rec.release()
	body, tooLarge, err := readBody(r, m.maxRequest, rec.reqBody[:0])
	switch {
	case tooLarge:
		writeProblem(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "The request body is too large.", 0)
		return
	case err != nil:
		writeProblem(w, http.StatusBadRequest, codeBodyUnreadable, "The request body could not be read.", 0)
		return
	}

	req := Request{
		Caller:      caller,
		Key:         key,
		Fingerprint: Fingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, body),
	}
	req.Refingerprint = rec.refingerprint
	if m.resume != "" {
		req.Work, req.Input = m.resume, encodeRequest(r, m.resumeHeaders, body)
	}
	rec.next, rec.req, rec.reqBody = h.next, r, body
	// Every answer from here on is the key's: it echoes the key, which
	// tells the client that this server deduplicates it (see Middleware).
	w.Header()[m.header] = values
	res, err := m.runner.Do(r.Context(), req, rec.run)
	h.respond(r.Context(), w, rec, res, err)
	if rec.panicked {
		panic(rec.panicVal)
	}
}

// respond writes the response for the result of Runner.Do. A store
// failure is logged (slog.Default), since the client sees only a problem
// code.
func (h *handler) respond(ctx context.Context, w http.ResponseWriter, rec *recorder, res Result, err error) {
	switch {
	case err == nil && res.Replayed:
		if werr := writeStored(w, res.Response, true); werr != nil {
			writeProblem(w, http.StatusInternalServerError, codeStoreFailed, "The stored response is unreadable.", 0)
		}
	case err == nil:
		rec.writeTo(w)
	case errors.Is(err, ErrRejected):
		rec.writeTo(w)
	case errors.Is(err, ErrAborted) && res.Response != nil:
		_ = writeStored(w, res.Response, false)
	case errors.As(err, new(*InProgressError)):
		writeProblem(w, http.StatusConflict, codeInProgress,
			"A request with this "+h.m.header+" is still being processed; retry later.", retryAfter(err))
	case errors.Is(err, ErrFingerprintMismatch):
		writeProblem(w, http.StatusUnprocessableEntity, codeKeyMismatch,
			"This "+h.m.header+" was used with a different request.", 0)
	case errors.Is(err, ErrLeaseLost):
		writeProblem(w, http.StatusConflict, codeLeaseLost,
			"This attempt ran past its lease and another attempt took over; retry to get its outcome.", time.Second)
	case errors.Is(err, ErrTxFailed) && permanent(err):
		writeProblem(w, http.StatusInternalServerError, codeTxFailed,
			"A statement of this request's transaction failed; it was rolled back and nothing was stored. "+
				"Retrying will fail the same way until the cause is fixed.", 0)
	case errors.Is(err, ErrTxFailed):
		writeProblem(w, http.StatusServiceUnavailable, codeTxFailed,
			"A statement of this request's transaction failed; it was rolled back and nothing was stored. "+
				"Retry with the same "+h.m.header+".", time.Second)
	case permanent(err):
		// A retry would fail the same way: not retryable.
		slog.ErrorContext(ctx, "idempotency: the store cannot take the request", slog.Any("error", err))
		writeProblem(w, http.StatusInternalServerError, codeStoreFailed, "The idempotency store cannot take this request.", 0)
	default:
		slog.WarnContext(ctx, "idempotency: the store is unavailable", slog.Any("error", err))
		writeProblem(w, http.StatusServiceUnavailable, codeStoreFailed, "The idempotency store is unavailable.", time.Second)
	}
}

// retryAfter returns the hint of an *InProgressError in err.
func retryAfter(err error) time.Duration {
	var ip *InProgressError
	if errors.As(err, &ip) {
		return ip.RetryAfter
	}
	return time.Second
}

// refingerprint is the request's Request.Refingerprint.
func (rw *recorder) refingerprint(version string) (string, bool) {
	r := rw.req
	return fingerprintWith(version, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, rw.reqBody)
}

// run is the Work of one request: it serves the request to the handler,
// recording the response and recovering a panic.
func (rw *recorder) run(ctx context.Context, e *Execution) ([]byte, error) {
	rw.exec = e
	hw := &handlerWriter{rw: rw}
	r := rw.req.WithContext(ctx)
	if rw.reqBody != nil {
		rw.in.Reset(rw.reqBody)
		hw.body.in = &rw.in
		r.Body = &hw.body
	}
	rw.serve(hw, r)
	return rw.outcome(rw.panicked)
}

// serve runs the handler, recovering a panic, and ends the handler's use of
// hw when it returns.
func (rw *recorder) serve(hw *handlerWriter, r *http.Request) {
	rw.panicked = true
	defer func() {
		if rw.panicked {
			rw.panicVal = recover()
		}
		hw.close(!rw.panicked)
	}()
	rw.next.ServeHTTP(hw, r)
	rw.panicked = false
}

// outcome turns the recorded response into a Work result.
func (rw *recorder) outcome(panicked bool) ([]byte, error) {
	switch {
	case panicked && rw.rejected:
		return nil, Reject(errHandlerPanicked)
	case panicked:
		return nil, Abort(problemResponse(http.StatusInternalServerError, codeHandlerPanicked,
			"The request failed; it will not be executed again."), errHandlerPanicked)
	}
	rw.finish()
	switch {
	case rw.rejected:
		return nil, Reject(errRejectedResponse)
	case rw.overflow:
		return nil, Abort(problemResponse(http.StatusInternalServerError, codeResponseTooBig,
			"The response was too large to store; the request will not be executed again."), errResponseTooLarge)
	}
	rw.enc = encodeResponse(rw.enc[:0], rw.status, rw.header, rw.body)
	return rw.enc, nil
}

// problemResponse encodes a problem response for storing.
func problemResponse(status int, code, detail string) []byte {
	b := problemBody(status, code, detail)
	h := http.Header{
		"Content-Type":   {"application/problem+json"},
		"Content-Length": {strconv.Itoa(len(b))},
	}
	return encodeResponse(nil, status, h, b)
}

// maxPooled is the largest buffer kept in a pooled recorder.
const maxPooled = 64 << 10

// firstBodyBuffer is the size of the request buffer made before any byte of
// the body has arrived.
const firstBodyBuffer = 2 << 10

// readBody reads r's body up to limit bytes, appending to buf. The buffer
// grows with the bytes that arrive (doubling, up to the limit), never ahead
// of them from the declared Content-Length: a client that declares a large
// body and stalls holds little memory.
func readBody(r *http.Request, limit int64, buf []byte) (body []byte, tooLarge bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, false, nil
	}
	if r.ContentLength > limit {
		return nil, true, nil
	}
	// Room for the declared length and one byte more, to see EOF without
	// growing; never more than that, nor than the limit allows.
	most := limit + 1
	if r.ContentLength >= 0 {
		most = r.ContentLength + 1
	}
	if cap(buf) == 0 {
		buf = make([]byte, 0, min(most, firstBodyBuffer))
	}
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) >= most {
				most = limit + 1 // more than declared: only the limit holds
			}
			grown := make([]byte, len(buf), min(most, 2*int64(cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}
