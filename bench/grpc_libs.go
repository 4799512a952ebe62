package bench

import (
	"time"

	grpcmw "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
)

// GRPCLibrary is one way of making gRPC calls under comparison.
type GRPCLibrary struct {
	// Name is the short name used in tables.
	Name string
	// Retries is false for the bare client.
	Retries bool
	// Dial returns the dial options of one client: a connection made with
	// them retries as the library does. Connections made with one result
	// share its state (our budget, grpc-go's throttle is per connection).
	Dial func() []grpc.DialOption
	// Bounded, if set, returns the dial options of a client whose every
	// attempt is bounded by d, through the library's own option; a
	// library without one runs with the call's deadline only.
	Bounded func(d time.Duration) []grpc.DialOption
	// RideThroughOff, if set, returns ours with riding through outages
	// off.
	RideThroughOff func() []grpc.DialOption
	// Told, if set, is Bounded's client that also tells what it knows of
	// its targets (ours).
	Told func(d time.Duration) ([]grpc.DialOption, func() []retry.DependencyStats)
}

// DialBounded returns the dial options of lib's client with every attempt
// bounded by d where the library can, else its plain options.
func (l GRPCLibrary) DialBounded(d time.Duration) []grpc.DialOption {
	if l.Bounded != nil {
		return l.Bounded(d)
	}
	return l.Dial()
}

// GRPCLibraries returns the gRPC clients under comparison: ours, a bare
// grpc-go client, grpc-go's built-in retry and go-grpc-middleware's retry
// interceptor, each with a 4-attempt policy (the peers' retries are off by
// default).
func GRPCLibraries() []GRPCLibrary {
	return []GRPCLibrary{
		{Name: "exactlyonce (grpcretry)", Retries: true, Dial: dialOurs, Bounded: dialOursBounded, RideThroughOff: dialOursOff, Told: dialOursTold},
		{Name: "grpc-go, no retry", Dial: func() []grpc.DialOption { return nil }},
		// grpc-go's retryPolicy has no attempt timeout: a call's deadline
		// bounds all of its attempts together.
		{Name: "grpc-go retryPolicy + retryThrottling", Retries: true, Dial: dialBuiltIn},
		{Name: "go-grpc-middleware retry", Retries: true, Dial: dialMiddleware, Bounded: dialMiddlewareBounded},
	}
}

// dialOurs is grpcretry's Client with its defaults (4 attempts, full
// jitter from 100 ms, the budget, riding through outages).
func dialOurs() []grpc.DialOption { return dialOursWith() }

// dialOursBounded is ours with retry.WithAttemptTimeout(d).
func dialOursBounded(d time.Duration) []grpc.DialOption {
	return dialOursWith(retry.WithAttemptTimeout(d))
}

// dialOursTold is dialOursBounded, and what its client knows of its
// targets.
func dialOursTold(d time.Duration) ([]grpc.DialOption, func() []retry.DependencyStats) {
	c := grpcretry.NewClient(retry.WithAttemptTimeout(d))
	return []grpc.DialOption{grpc.WithDisableRetry(), grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream)}, c.Dependencies
}

// dialOursOff is ours with riding through outages off.
func dialOursOff() []grpc.DialOption {
	return dialOursWith(retry.WithoutRideThrough())
}

// dialOursWith is grpcretry's Client with opts on top of its defaults,
// wired as its documentation says: grpc-go's own retry off, so that a
// service config's retryPolicy never multiplies ours.
func dialOursWith(opts ...retry.Option) []grpc.DialOption {
	c := grpcretry.NewClient(opts...)
	return []grpc.DialOption{grpc.WithDisableRetry(), grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream)}
}

// builtInServiceConfig is grpc-go's retry as its documentation shows it:
// a retryPolicy listing UNAVAILABLE with 4 attempts, exponential backoff
// from 100 ms (grpc-go's jitter: +-20%), and retryThrottling.
const builtInServiceConfig = `{
  "methodConfig": [{
    "name": [{"service": "exactlyonce.grpcretry.payments.Payments"}],
    "retryPolicy": {
      "maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

func dialBuiltIn() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultServiceConfig(builtInServiceConfig)}
}

// dialMiddleware is go-grpc-middleware's retry interceptor with 4 attempts
// (its default is none), its default codes (UNAVAILABLE,
// RESOURCE_EXHAUSTED) and exponential backoff from 100 ms with 10% jitter.
func dialMiddleware() []grpc.DialOption { return dialMiddlewareWith() }

// dialMiddlewareBounded is go-grpc-middleware's retry with
// WithPerRetryTimeout(d), which also retries an attempt that ran out of it.
func dialMiddlewareBounded(d time.Duration) []grpc.DialOption {
	return dialMiddlewareWith(grpcmw.WithPerRetryTimeout(d))
}

// dialMiddlewareWith is dialMiddleware's interceptor with extra options.
func dialMiddlewareWith(extra ...grpcmw.CallOption) []grpc.DialOption {
	opts := append([]grpcmw.CallOption{
		grpcmw.WithMax(4),
		grpcmw.WithCodes(codes.Unavailable, codes.ResourceExhausted),
		grpcmw.WithBackoff(grpcmw.BackoffExponentialWithJitter(100*time.Millisecond, 0.1)),
	}, extra...)
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(grpcmw.UnaryClientInterceptor(opts...)),
		grpc.WithChainStreamInterceptor(grpcmw.StreamClientInterceptor(opts...)),
	}
}
