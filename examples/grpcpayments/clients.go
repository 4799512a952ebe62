package main

import (
	"time"

	"google.golang.org/grpc"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/grpcretry"
)

// Policy shared by the clients, so that only the key differs: 5 attempts,
// waits from 5 ms to 50 ms, 10 s per charge.
const (
	maxAttempts   = 5
	chargeTimeout = 10 * time.Second
)

// clientKind names a client and the dial options that make it.
type clientKind struct {
	name string
	dial func() []grpc.DialOption
}

// clientKinds are the clients compared, ours first.
var clientKinds = []clientKind{
	{"exactlyonce (key)", ours},
	{"grpc-go retryPolicy (no key)", builtIn},
}

// ours is grpcretry's Client: Charge, not declared idempotent, gets a key
// that stays the same on all its attempts. One Client serves every
// connection, so they share its budget and the target's gate. grpc-go's own
// retry is off, as grpcretry's documentation says.
func ours() []grpc.DialOption {
	c := grpcretry.NewClient(
		retry.WithMaxAttempts(maxAttempts),
		retry.WithBackoff(backoff.FullJitter(5*time.Millisecond, 50*time.Millisecond)),
		retry.WithTotalTimeout(chargeTimeout),
	)
	return []grpc.DialOption{grpc.WithDisableRetry(), grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream)}
}

// builtInConfig is grpc-go's own retry, as its documentation shows it: a
// retryPolicy that lists UNAVAILABLE, and retryThrottling.
const builtInConfig = `{
  "methodConfig": [{
    "name": [{"service": "exactlyonce.grpcretry.payments.Payments"}],
    "retryPolicy": {
      "maxAttempts": 5, "initialBackoff": "0.005s", "maxBackoff": "0.05s",
      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

// builtIn is grpc-go's built-in retry with a retryPolicy: no key.
func builtIn() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultServiceConfig(builtInConfig)}
}
