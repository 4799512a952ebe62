package retry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Classifier reports whether a failed attempt's error is worth retrying.
// It is consulted only for non-nil errors, after the context and the
// Permanent and RetryAfter markers have been considered: a context that has
// ended stops the loop whatever the classifier says, Permanent always stops,
// and RetryAfter always retries.
type Classifier func(err error) bool

// DefaultClassifier is the classifier Do uses: it retries every error except
// those known to be permanent by their type (see IsPermanentFailure). Do runs
// code the caller has declared safe to repeat, so unknown errors are retried;
// use TransientOnly to retry only known transient failures.
func DefaultClassifier(err error) bool {
	return !IsPermanentFailure(err)
}

// TransientOnly retries only errors that IsTransient recognises.
func TransientOnly(err error) bool {
	return IsTransient(err)
}

// IsTransient reports whether err is, by its type, a failure that another
// attempt may not meet: a timeout (net.Error.Timeout, os.ErrDeadlineExceeded,
// context.DeadlineExceeded of an attempt), a connection reset, refused or
// aborted, a broken pipe, an unreachable network or host, an unexpected EOF,
// or a temporary DNS failure. Messages are never inspected.
func IsTransient(err error) bool {
	switch {
	case err == nil:
		return false
	case isAttemptTimeout(err):
		return true
	case IsPermanentFailure(err):
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		// A connection closed before a whole response arrived.
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ECONNABORTED,
			syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH,
			syscall.ENETUNREACH, syscall.ENETDOWN, syscall.EHOSTDOWN:
			return true
		}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	return false
}

// IsPermanentFailure reports whether err is, by its type, a failure that
// another attempt will meet again: a cancelled context, an error marked with
// Permanent, a TLS certificate or handshake verification failure, a host that
// DNS says does not exist, or an invalid address.
func IsPermanentFailure(err error) bool {
	switch {
	case err == nil, isAttemptTimeout(err):
		// An attempt cut off by its own timeout: the request as a whole
		// may well succeed.
		return false
	case errors.Is(err, context.Canceled), IsPermanent(err):
		return true
	}
	var (
		certErr     *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		dnsErr      *net.DNSError
		addrErr     *net.AddrError
		parseErr    *net.ParseError
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &invalidErr),
		errors.As(err, &recordErr), errors.As(err, &alertErr),
		errors.As(err, &addrErr), errors.As(err, &parseErr):
		return true
	case errors.As(err, &dnsErr):
		return dnsErr.IsNotFound
	}
	return false
}

// isAttemptTimeout reports whether err is an attempt cut off by its timeout.
func isAttemptTimeout(err error) bool {
	var timeout *AttemptTimeoutError
	return errors.As(err, &timeout)
}
