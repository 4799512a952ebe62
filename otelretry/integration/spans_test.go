package integration_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/otelretry"
)

// A hedged PUT whose body cannot be had a second time: the hedge is not
// sent, and no span is left open. (The hedge's span was started before its
// body was asked for, and never ended.)
func TestHedgeWithoutASecondBodyLeavesNoSpanOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness()
		var sends atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sends.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-time.After(time.Second): // slow enough to be hedged
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
		})
		tr := retry.NewTransport(base, h.tel.Option(), retry.WithHedging(retry.Hedging{MinDelay: time.Millisecond}))
		req, err := http.NewRequest(http.MethodPut, "http://mem.test/doc", strings.NewReader("v2"))
		require.NoError(t, err)
		var gets atomic.Int32
		req.GetBody = func() (io.ReadCloser, error) {
			if gets.Add(1) > 1 {
				return nil, errors.New("the body is gone")
			}
			return io.NopCloser(strings.NewReader("v2")), nil
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		assert.Equal(t, int32(2), gets.Load(), "the hedge asked for its body")
		assert.Equal(t, int32(1), sends.Load())
		assert.Empty(t, h.open.names(), "every span that started ended")
		assert.Len(t, h.named("PUT"), 1, "a span for the send that was made")
		assert.Len(t, h.named("retry PUT"), 1)
	})
}

// A Do whose operation panics ends its span, with an error status and an
// exception event, and the panic goes on. (The span was never ended.)
func TestDoThatPanicsEndsItsSpan(t *testing.T) {
	h := newHarness()
	assert.PanicsWithValue(t, "the ledger's client is nil", func() {
		_ = retry.Do(context.Background(), func(ctx context.Context) error {
			panic("the ledger's client is nil")
		}, h.tel.Option())
	})
	assert.Empty(t, h.open.names(), "every span that started ended")
	spans := h.named("retry")
	require.Len(t, spans, 1)
	assert.Equal(t, codes.Error, spans[0].Status.Code)
	var exception []attribute.KeyValue
	for _, ev := range spans[0].Events {
		if ev.Name == "exception" {
			exception = ev.Attributes
		}
	}
	require.NotNil(t, exception, "an exception event")
	assert.Contains(t, exception, attribute.String("exception.type", "string"))
	assert.Contains(t, exception, attribute.String("exception.message", "the ledger's client is nil"))
}

// urlsOf returns every url.full on the ended spans.
func urlsOf(spans []tracetest.SpanStub) []string {
	var urls []string
	for _, s := range spans {
		if v, ok := attr(s, "url.full"); ok {
			urls = append(urls, v.AsString())
		}
	}
	return urls
}

// No credential of a URL reaches a span: user names and passwords are
// REDACTED, and so are the values of the query parameters that carry
// signatures and tokens (presigned URLs); the rest of the URL is kept as it
// was. (URL.Redacted kept the user name, a token by itself, and presigned
// query strings whole.)
func TestNoCredentialsInSpans(t *testing.T) {
	for _, tc := range []struct {
		url, want string
		secrets   []string
	}{{
		url:     "http://sk_test_4eC39HqLyjWDarjtT1zdp7dc:xxxxx@api.mem.test/v1/charges?limit=3",
		want:    "http://REDACTED:REDACTED@api.mem.test/v1/charges?limit=3",
		secrets: []string{"sk_test_4eC39HqLyjWDarjtT1zdp7dc", "xxxxx"},
	}, {
		url:     "https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@git.mem.test/repo.git",
		want:    "https://REDACTED:REDACTED@git.mem.test/repo.git",
		secrets: []string{"ghp_16C7e42F292c6912E7710c838347Ae178B4a"},
	}, {
		url: "https://bucket.s3.mem.test/photo.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
			"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request" +
			"&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host" +
			"&X-Amz-Security-Token=FwoGZXIvYXdzEBYaDH&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
		want: "https://bucket.s3.mem.test/photo.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
			"&X-Amz-Credential=REDACTED&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host" +
			"&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED",
		secrets: []string{"AKIAIOSFODNN7EXAMPLE", "FwoGZXIvYXdzEBYaDH", "fe5f80f77d5fa3be"},
	}, {
		url:     "https://acct.blob.mem.test/c/b?sv=2022-11-02&se=2026-01-02&sr=b&sp=r&sig=6Ndl4%2Bxk%3D&color=blue",
		want:    "https://acct.blob.mem.test/c/b?sv=2022-11-02&se=2026-01-02&sr=b&sp=r&sig=REDACTED&color=blue",
		secrets: []string{"6Ndl4"},
	}, {
		url:     "https://storage.mem.test/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=sa%40p.iam&X-Goog-Signature=8a1f&Signature=c2ln&AWSAccessKeyId=AKIA2&access_token=ya29.a0",
		want:    "https://storage.mem.test/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=REDACTED&X-Goog-Signature=REDACTED&Signature=REDACTED&AWSAccessKeyId=REDACTED&access_token=REDACTED",
		secrets: []string{"sa%40p.iam", "8a1f", "c2ln", "AKIA2", "ya29.a0"},
	}} {
		h := newHarness()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			// An error that names the URL, as url.Error does.
			return nil, &url.Error{Op: "Get", URL: r.URL.String(), Err: errors.New("connection refused")}
		})
		tr := retry.NewTransport(base, h.tel.Option(), retry.WithMaxAttempts(2), retry.WithBackoff(backoff.Constant(0)))
		req, err := http.NewRequest(http.MethodGet, tc.url, nil)
		require.NoError(t, err)
		_, err = tr.RoundTrip(req)
		require.Error(t, err)
		spans := h.spans.GetSpans()
		urls := urlsOf(spans)
		require.Len(t, urls, len(spans), "the request's span and each attempt's")
		for _, u := range urls {
			assert.Equal(t, tc.want, u)
		}
		for _, s := range spans {
			for _, secret := range tc.secrets {
				assert.NotContains(t, s.Status.Description, secret, "%s's status", s.Name)
				for _, kv := range s.Attributes {
					assert.NotContains(t, kv.Value.Emit(), secret, "%s's %s", s.Name, kv.Key)
				}
				for _, ev := range s.Events {
					for _, kv := range ev.Attributes {
						assert.NotContains(t, kv.Value.Emit(), secret, "%s's event %s, %s", s.Name, ev.Name, kv.Key)
					}
				}
			}
		}
		assert.Contains(t, h.named("GET")[0].Status.Description, "REDACTED", "the error's own URL is redacted too")
	}
}

// A method the conventions do not know is recorded as _OTHER, with the
// original in http.request.method_original, and names no span: span names
// never grow with what clients send. (The method went into the attribute
// and the span names as it was.)
func TestUnknownMethodIsOther(t *testing.T) {
	h := newHarness()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	tr := retry.NewTransport(base, h.tel.Option())
	for _, method := range []string{"PURGE-7F3A9C21", "get", http.MethodPatch, "QUERY"} {
		req, err := http.NewRequest(method, "http://mem.test/", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	for _, tc := range []struct{ name, method, original string }{
		{"HTTP", "_OTHER", "PURGE-7F3A9C21"},
		{"HTTP", "_OTHER", "get"}, // methods are case-sensitive
		{"PATCH", "PATCH", ""},
		{"QUERY", "QUERY", ""},
	} {
		found := false
		for _, s := range h.spans.GetSpans() {
			original, hasOriginal := attr(s, "http.request.method_original")
			if s.Name != tc.name && s.Name != "retry "+tc.name || original.AsString() != tc.original {
				continue
			}
			found = true
			method, _ := attr(s, "http.request.method")
			assert.Equal(t, tc.method, method.AsString(), s.Name)
			assert.Equal(t, tc.original != "", hasOriginal, s.Name)
		}
		assert.True(t, found, "no span for %+v", tc)
	}
	for _, s := range h.spans.GetSpans() {
		assert.NotContains(t, s.Name, "PURGE")
	}
}

// The methods known can be set by OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS,
// as the conventions ask: a full override of the default list.
func TestKnownMethodsFromTheEnvironment(t *testing.T) {
	t.Setenv("OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS", "GET,PURGE")
	h := newHarness()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	tr := retry.NewTransport(base, h.tel.Option())
	for _, method := range []string{"PURGE", http.MethodPut} {
		req, err := http.NewRequest(method, "http://mem.test/", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Len(t, h.named("retry PURGE"), 1)
	assert.Len(t, h.named("retry HTTP"), 1, "PUT is not in the list")
}

// A keyed 409 (the first copy still running) is waited out: the request it
// answers reached the server and counts as an attempt, but the wait is no
// retry. (It was counted as one.)
func TestKeyedConflictIsNoRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness()
		var n atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			_, _ = io.Copy(io.Discard, r.Body)
			if n.Add(1) == 1 {
				return &http.Response{StatusCode: http.StatusConflict, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: r}, nil
			}
			return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: r}, nil
		})
		tr := retry.NewTransport(base, h.tel.Option())
		resp, err := (&http.Client{Transport: tr}).Post("http://mem.test/charges", "text/plain", strings.NewReader("10"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Zero(t, h.count(t, otelretry.MetricRetries), "waiting for the first copy is no retry")
		assert.Equal(t, int64(2), h.count(t, otelretry.MetricAttempts))
		assert.Equal(t, int64(1), h.count(t, otelretry.MetricAttempts, otelretry.AttrOutcome.String("failure"), attribute.String("error.type", "409")))
	})
}

// A RoundTrip whose base panics ends its spans too.
func TestRoundTripThatPanicsEndsItsSpans(t *testing.T) {
	h := newHarness()
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { panic("the base is broken") })
	req, err := http.NewRequest(http.MethodGet, "http://mem.test/", nil)
	require.NoError(t, err)
	assert.PanicsWithValue(t, "the base is broken", func() {
		_, _ = retry.NewTransport(base, h.tel.Option()).RoundTrip(req)
	})
	spans := h.named("retry GET")
	require.Len(t, spans, 1)
	assert.Equal(t, codes.Error, spans[0].Status.Code)
	assert.Empty(t, h.open.names(), "every span that started ended")
}
