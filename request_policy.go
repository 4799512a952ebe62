package retry

import "context"

// requestPolicyKey is the context key of a request's own options.
type requestPolicyKey struct{}

// requestOptions are the options a context gives the requests and Do calls
// made with it.
type requestOptions []Option

func policyOf(ctx context.Context) requestOptions {
	p, _ := ctx.Value(requestPolicyKey{}).(requestOptions)
	return p
}

// NewContext returns a context that gives the requests made with it (by
// any Transport) their own policy: opts apply on top of the Transport's,
// for example WithoutRetries, WithIdempotent, WithMaxAttempts,
// WithTotalTimeout or WithReport, without building another Transport.
// Options added to a context that already has some come after them. Inside
// Do, a Transport still makes a single attempt whatever they say.
func NewContext(ctx context.Context, opts ...Option) context.Context {
	all := append(append(requestOptions(nil), policyOf(ctx)...), opts...)
	return context.WithValue(ctx, requestPolicyKey{}, all)
}
