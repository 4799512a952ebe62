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

// retryUnlessPermanent is Do's default classifier: it retries every error
// but those IsPermanent recognises. Do runs code its caller declared safe
// to repeat, so unknown errors are retried.
func retryUnlessPermanent(err error) bool {
	return !IsPermanent(err)
}

// IsTransient reports whether err is, by its type, a failure that another
// attempt may not meet (the Transport's default classifier, see
// WithClassifier): a timeout (net.Error.Timeout, os.ErrDeadlineExceeded,
// context.DeadlineExceeded of an attempt), a connection reset, refused or
// aborted, a broken pipe, an unreachable network or host, an unexpected EOF,
// or a temporary DNS failure. Messages are never inspected.
func IsTransient(err error) bool {
	switch {
	case err == nil:
		return false
	case isAttemptTimeout(err):
		return true
	case IsPermanent(err):
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

// IsPermanent reports whether another attempt will meet err again: it was
// marked with Permanent, or it is by its type a cancelled context, a TLS
// certificate or handshake verification failure, a host that DNS says does
// not exist, or an invalid address. Messages are never inspected. Do stops
// on such errors by default.
func IsPermanent(err error) bool {
	var marked *permanentError
	switch {
	case err == nil, isAttemptTimeout(err):
		// An attempt cut off by its own timeout: the request as a whole
		// may well succeed.
		return false
	case errors.As(err, &marked), errors.Is(err, context.Canceled):
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
