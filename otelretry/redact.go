package otelretry

import (
	"net/url"
	"strings"
)

// redacted replaces what a URL carries of credentials, as the semantic
// conventions ask of url.full.
const redacted = "REDACTED"

// sensitiveParams are the query parameters whose values are credentials:
// the signatures and credentials of presigned URLs (Amazon S3 in both
// signature versions, Google Cloud Storage, Azure's shared access
// signatures), and an OAuth bearer token sent in the query (RFC 6750).
// The conventions list X-Amz-Signature, X-Amz-Credential,
// X-Amz-Security-Token, sig and X-Goog-Signature, and match them by case;
// we match all of these regardless of case, since a credential sent under
// another case is still a credential.
var sensitiveParams = []string{
	"X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token",
	"X-Goog-Signature", "X-Goog-Credential",
	"sig", "Signature", "AWSAccessKeyId",
	"access_token",
}

// fullURL is url.full for u: u as it is, but for its user information
// (user name and password, each REDACTED: a user name alone is often a
// token) and the values of sensitiveParams in its query (REDACTED, the
// parameter kept). Nothing else of the URL changes, its escaping included.
func fullURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		c.User = url.UserPassword(redacted, redacted)
	}
	c.RawQuery = redactQuery(c.RawQuery)
	return c.String()
}

// redactQuery replaces the values of sensitiveParams in a raw query,
// whether its parameters are separated by '&' or by ';' (which some
// servers still take).
func redactQuery(raw string) string {
	if raw == "" {
		return raw
	}
	var b strings.Builder
	rest := raw
	for rest != "" {
		end := strings.IndexAny(rest, "&;")
		param, sep := rest, ""
		if end >= 0 {
			param, sep, rest = rest[:end], rest[end:end+1], rest[end+1:]
		} else {
			rest = ""
		}
		name, _, hasValue := strings.Cut(param, "=")
		if hasValue && sensitive(name) {
			param = name + "=" + redacted
		}
		b.WriteString(param)
		b.WriteString(sep)
	}
	return b.String()
}

// sensitive reports whether a query parameter's (escaped) name is one of
// sensitiveParams.
func sensitive(name string) bool {
	if unescaped, err := url.QueryUnescape(name); err == nil {
		name = unescaped
	}
	for _, s := range sensitiveParams {
		if strings.EqualFold(name, s) {
			return true
		}
	}
	return false
}

// errorText is err's message for a span's status, with the URLs it names
// redacted as url.full is: u's (the request's, as it was sent), and that of
// every *url.Error in err's tree.
func errorText(err error, u *url.URL) string {
	msg := err.Error()
	if u != nil {
		msg = redactIn(msg, u.String())
	}
	return redactURLErrors(msg, err)
}

// redactURLErrors redacts in msg the URL of every *url.Error in err's tree.
func redactURLErrors(msg string, err error) string {
	if ue, ok := err.(*url.Error); ok {
		msg = redactIn(msg, ue.URL)
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		if next := e.Unwrap(); next != nil {
			msg = redactURLErrors(msg, next)
		}
	case interface{ Unwrap() []error }:
		for _, next := range e.Unwrap() {
			if next != nil {
				msg = redactURLErrors(msg, next)
			}
		}
	}
	return msg
}

// redactIn replaces raw, a URL, in msg by its url.full (REDACTED whole
// when it does not parse).
func redactIn(msg, raw string) string {
	if raw == "" || !strings.Contains(msg, raw) {
		return msg
	}
	safe := redacted
	if u, err := url.Parse(raw); err == nil {
		safe = fullURL(u)
	}
	return strings.ReplaceAll(msg, raw, safe)
}
