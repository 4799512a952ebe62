package grpcretry

import (
	"google.golang.org/grpc"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// Client holds the retry policy of a gRPC client: its interceptors, Unary
// and Stream, run every call on the retry loop behind the HTTP Transport
// and retry.Do (see the package documentation). Install both on a
// connection dialled with grpc.WithDisableRetry, so that retries happen at
// one layer, ours:
//
//	retrying := grpcretry.NewClient(retry.WithTotalTimeout(5 * time.Second))
//	conn, err := grpc.NewClient(addr, creds,
//		grpc.WithDisableRetry(), // one layer of retries: ours
//		grpc.WithChainUnaryInterceptor(retrying.Unary), grpc.WithChainStreamInterceptor(retrying.Stream))
//
// Without grpc.WithDisableRetry, a retryPolicy in the connection's service
// config (from DNS, xDS or grpc.WithDefaultServiceConfig) retries inside
// each of our attempts, and the two layers multiply: 4 attempts of ours,
// each up to maxAttempts of grpc-go's. An interceptor cannot see whether
// the connection was dialled with it, so the Client cannot check it for
// you. grpc.WithDisableRetry keeps grpc-go's transparent retries, of
// attempts that never reached the server's application.
//
// One Client may serve many connections: they then share its budget, and
// each target (a connection's Target) has its own gate for riding through
// outages and its own latency estimate. A Client is safe for concurrent
// use and immutable once built.
type Client struct {
	caller  *protocol.Caller
	methods methods
	keys    keyTargets // the targets that have shown they honour keys
}

// NewClient returns a Client with the policy given by opts, the same
// Options that configure retry.NewTransport and retry.Do. Unless
// retry.WithBudget is given, it has a retry budget of its own
// (retry.NewBudget(0.1, 1, 20): retries held to 10% of successes, 20
// tokens to start, 1 retry/s when empty). retry.WithClassifier and the options of HTTP
// bodies and statuses do not apply (status codes decide, see the package
// documentation; RetryableCodes chooses which are retried, per call or per
// connection), nor does retry.WithKeyHeader: the key travels as
// KeyMetadata.
func NewClient(opts ...retry.Option) *Client {
	return &Client{caller: protocol.NewCaller(opts...)}
}

// Budget returns the Client's retry budget (nil when unlimited), for its
// statistics.
func (c *Client) Budget() *retry.Budget { return c.caller.Budget() }

// Dependencies returns what the Client knows of each target it called
// (see retry.RideThrough), for monitoring.
func (c *Client) Dependencies() []retry.DependencyStats { return c.caller.Dependencies() }

// callPolicy is the grpc.CallOption made by CallPolicy.
type callPolicy struct {
	grpc.EmptyCallOption
	opts []retry.Option
}

// CallPolicy gives one call its own policy, as retry.NewContext does for
// a request through a Transport: opts apply on top of the Client's and the
// context's, for example retry.WithoutRetries(), retry.WithMaxAttempts(n),
// retry.WithIdempotent() or retry.WithReport(&report):
//
//	reply, err := client.Charge(ctx, req, grpcretry.CallPolicy(retry.WithReport(&report)))
//
// A call that should keep a key of its own sends it in its outgoing
// metadata (KeyMetadata); the Client then adds none.
func CallPolicy(opts ...retry.Option) grpc.CallOption {
	return callPolicy{opts: opts}
}

// policyOf returns the options of the call's CallPolicy options, if any.
func policyOf(opts []grpc.CallOption) []retry.Option {
	var out []retry.Option
	for _, o := range opts {
		if p, ok := o.(callPolicy); ok {
			out = append(out, p.opts...)
		}
	}
	return out
}
