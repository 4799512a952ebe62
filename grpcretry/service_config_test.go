package grpcretry_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// retryingServiceConfig is a service config with grpc-go's retryPolicy, as
// DNS or xDS may hand one to a connection: 4 attempts of UNAVAILABLE.
const retryingServiceConfig = `{"methodConfig":[{"name":[{"service":"exactlyonce.grpcretry.payments.Payments"}],
	"retryPolicy":{"maxAttempts":4,"initialBackoff":"0.001s","maxBackoff":"0.002s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// A service config's retryPolicy retries inside each of our attempts: the
// layers multiply, 4 x 4 attempts at a dead server for one call, unless
// the connection is dialled with grpc.WithDisableRetry, as the Client's
// documentation says; then 4.
func TestServiceConfigRetriesMultiplyOursUnlessDisabled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		disable  bool
		attempts int
	}{
		{"without grpc.WithDisableRetry", false, 16},
		{"with grpc.WithDisableRetry", true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dead := &attempts{script: failFirst(1_000_000, unavailable)}
			opts := []grpc.DialOption{grpc.WithDefaultServiceConfig(retryingServiceConfig)}
			if tc.disable {
				opts = append(opts, grpc.WithDisableRetry())
			}
			client := dial(t, servePayments(t, true, &payments{}, dead), grpcretry.NewClient(fast), opts...)
			var report retry.Report
			_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, grpcretry.CallPolicy(retry.WithReport(&report)))
			assert.Equal(t, codes.Unavailable, status.Code(err))
			assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
			assert.Equal(t, 4, report.Attempts, "our attempts")
			assert.Equal(t, tc.attempts, dead.Count(), "the attempts the server saw")
		})
	}
}
