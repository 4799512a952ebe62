package retry_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/exactlyonce/retry"
)

// timeoutErr is a net.Error that reports a timeout.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func opErr(err error) error {
	return &url.Error{Op: "Get", URL: "http://example.test", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", err)}}
}

func TestClassification(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		transient bool
		permanent bool
	}{
		{"nil", nil, false, false},
		{"connection reset", opErr(syscall.ECONNRESET), true, false},
		{"connection refused", opErr(syscall.ECONNREFUSED), true, false},
		{"broken pipe", opErr(syscall.EPIPE), true, false},
		{"host unreachable", opErr(syscall.EHOSTUNREACH), true, false},
		{"net timeout", &url.Error{Op: "Get", URL: "u", Err: timeoutErr{}}, true, false},
		{"os deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), true, false},
		{"attempt deadline", context.DeadlineExceeded, true, false},
		{"unexpected EOF", &url.Error{Op: "Get", URL: "u", Err: io.ErrUnexpectedEOF}, true, false},
		{"server closed", &url.Error{Op: "Get", URL: "u", Err: io.EOF}, true, false},
		{"dns temporary", &net.DNSError{Err: "x", Name: "h", IsTemporary: true}, true, false},
		{"dns timeout", &net.DNSError{Err: "x", Name: "h", IsTimeout: true}, true, false},
		{"dns not found", &net.DNSError{Err: "x", Name: "h", IsNotFound: true}, false, true},
		{"cancelled", fmt.Errorf("op: %w", context.Canceled), false, true},
		{"marked permanent", retry.Permanent(opErr(syscall.ECONNRESET)), false, true},
		{"unknown authority", &url.Error{Op: "Get", URL: "u", Err: x509.UnknownAuthorityError{}}, false, true},
		{"hostname", x509.HostnameError{Host: "h"}, false, true},
		{"cert verification", &tls.CertificateVerificationError{Err: errors.New("x")}, false, true},
		{"tls alert", tls.AlertError(42), false, true},
		{"bad address", &net.AddrError{Err: "missing port", Addr: "h"}, false, true},
		{"plain error", errors.New("connection reset by peer"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.transient, retry.IsTransient(tt.err), "IsTransient")
			assert.Equal(t, tt.permanent, retry.IsPermanent(tt.err), "IsPermanent")
		})
	}
}

func TestMarkersOfNilAreNil(t *testing.T) {
	assert.NoError(t, retry.Permanent(nil))
	assert.NoError(t, retry.RetryAfter(time.Second, nil))
	assert.False(t, retry.IsPermanent(nil))
	assert.True(t, retry.IsPermanent(fmt.Errorf("wrapped: %w", retry.Permanent(errFlaky))))
	assert.ErrorIs(t, retry.RetryAfter(-time.Second, errFlaky), errFlaky)
	assert.Equal(t, errFlaky.Error(), retry.Permanent(errFlaky).Error())
}

func TestErrorUnwrapsReasonLastAndContext(t *testing.T) {
	e := &retry.Error{Attempts: 2, Reason: retry.ErrCancelled, Last: errFlaky, Context: context.Canceled}
	assert.ErrorIs(t, e, retry.ErrCancelled)
	assert.ErrorIs(t, e, errFlaky)
	assert.ErrorIs(t, e, context.Canceled)
	assert.Equal(t, "retry: cancelled after 2 attempts: flaky", e.Error())
	none := &retry.Error{Attempts: 0, Reason: retry.ErrDeadline}
	assert.Equal(t, []error{retry.ErrDeadline}, none.Unwrap())
	assert.Equal(t, "retry: deadline reached after 0 attempts", none.Error())
}
