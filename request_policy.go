package retry

import "context"

// requestPolicy is what a caller said, through a request's context, about
// that one request.
type requestPolicy struct {
	noRetry    bool
	idempotent bool
	opts       []Option
}

type requestPolicyKey struct{}

func policyOf(ctx context.Context) *requestPolicy {
	p, _ := ctx.Value(requestPolicyKey{}).(*requestPolicy)
	return p
}

// withPolicy returns ctx carrying a copy of its policy changed by change.
func withPolicy(ctx context.Context, change func(*requestPolicy)) context.Context {
	p := &requestPolicy{}
	if old := policyOf(ctx); old != nil {
		*p = *old
		p.opts = append([]Option(nil), old.opts...)
	}
	change(p)
	return context.WithValue(ctx, requestPolicyKey{}, p)
}

// NoRetry marks the requests made with the returned context as never to be
// retried: a Transport sends them once, whatever comes back, and adds no
// idempotency key. Use it for a deliberately non-idempotent call.
func NoRetry(ctx context.Context) context.Context {
	return withPolicy(ctx, func(p *requestPolicy) { p.noRetry = true })
}

// Idempotent marks the requests made with the returned context as safe to
// repeat although their method is not (a POST that only queries, say): a
// Transport retries them like a GET, without adding a key.
func Idempotent(ctx context.Context) context.Context {
	return withPolicy(ctx, func(p *requestPolicy) { p.idempotent = true })
}

// WithRequestOptions gives the requests made with the returned context their
// own policy: opts apply on top of the Transport's (for example their own
// WithMaxAttempts and WithTotalTimeout), without building another Transport.
// Options given this way for one context accumulate. They apply inside Do
// too, where the Transport makes a single attempt whatever they say.
func WithRequestOptions(ctx context.Context, opts ...Option) context.Context {
	return withPolicy(ctx, func(p *requestPolicy) { p.opts = append(p.opts, opts...) })
}
