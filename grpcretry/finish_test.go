package grpcretry_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// finishes records what the grpc.OnFinish callback of a call heard.
type finishes struct {
	mu   sync.Mutex
	errs []error
}

func (f *finishes) option() grpc.CallOption {
	return grpc.OnFinish(func(err error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.errs = append(f.errs, err)
	})
}

func (f *finishes) heard() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...)
}

// gRPC runs a call's OnFinish once; a call made in three attempts is one
// call to the interceptors above ours that count with it.
func TestOnFinishRunsOncePerUnaryCall(t *testing.T) {
	a := &attempts{script: failFirst(2, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	var ok finishes
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{}, ok.option())
	require.NoError(t, err)
	assert.Equal(t, 3, a.Count())
	assert.Equal(t, []error{nil}, ok.heard(), "once, with the call's outcome")

	a.script = failFirst(1000, unavailable)
	var failed finishes
	_, err = client.Charge(testCtx(t), &paymentspb.ChargeRequest{}, failed.option())
	require.Error(t, err)
	heard := failed.heard()
	require.Len(t, heard, 1, "once, after the last attempt")
	assert.Equal(t, err, heard[0], "the error the call returned")
	assert.Equal(t, codes.Unavailable, status.Code(heard[0]))
}

func TestOnFinishRunsOncePerServerStream(t *testing.T) {
	a := &attempts{script: failFirst(2, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	var f finishes
	s, err := client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Count: 2}, f.option())
	require.NoError(t, err)
	ids, err := recvAll(s)
	require.NoError(t, err)
	assert.Len(t, ids, 2)
	assert.Equal(t, 3, a.Count())
	assert.Equal(t, []error{nil}, f.heard(), "once, when the stream that answered ended")

	a.script = failFirst(1000, unavailable)
	var failed finishes
	s, err = client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Count: 2}, failed.option())
	require.NoError(t, err)
	_, err = recvAll(s)
	require.Error(t, err)
	heard := failed.heard()
	require.Len(t, heard, 1)
	assert.Equal(t, codes.Unavailable, status.Code(heard[0]))
}
