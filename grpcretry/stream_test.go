package grpcretry_test

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// recvAll reads a server stream to its end.
func recvAll(s grpc.ServerStreamingClient[paymentspb.ChargeReply]) ([]string, error) {
	var ids []string
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return ids, nil
		}
		if err != nil {
			return ids, err
		}
		ids = append(ids, r.Id)
	}
}

func TestServerStreamIsRetriedBeforeItsFirstReply(t *testing.T) {
	a := &attempts{script: failFirst(2, unavailable)}
	client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast))
	s, err := client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Account: "acct", Count: 3})
	require.NoError(t, err)
	ids, err := recvAll(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"ch_1", "ch_2", "ch_3"}, ids)
	assert.Equal(t, 3, a.Count())
	assert.Equal(t, []string{"", "", ""}, a.Keys(), "NO_SIDE_EFFECTS: no key")
}

func TestServerStreamWithEffectsCarriesAKey(t *testing.T) {
	a := &attempts{script: failFirst(1, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	s, err := client.Export(testCtx(t), &paymentspb.ListChargesRequest{Count: 1})
	require.NoError(t, err)
	_, err = recvAll(s)
	require.NoError(t, err)
	keys := a.Keys()
	require.Len(t, keys, 2)
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, keys[0], keys[1])
}

func TestServerStreamIsNeverReopenedAfterAReply(t *testing.T) {
	var opened atomic.Int32
	p := &payments{list: func(req *paymentspb.ListChargesRequest, s grpc.ServerStreamingServer[paymentspb.ChargeReply]) error {
		opened.Add(1)
		for i := range 2 {
			if err := s.Send(&paymentspb.ChargeReply{Id: fmt.Sprint(i)}); err != nil {
				return err
			}
		}
		return status.Error(codes.Unavailable, "gone mid-stream")
	}}
	client := dial(t, servePayments(t, false, p, &attempts{}), grpcretry.NewClient(fast))
	s, err := client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{})
	require.NoError(t, err)
	ids, err := recvAll(s)
	assert.Equal(t, []string{"0", "1"}, ids, "each reply once: nothing replayed")
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.EqualValues(t, 1, opened.Load())
}

func TestServerStreamThatEndsAtOnce(t *testing.T) {
	client := dial(t, servePayments(t, false, &payments{}, &attempts{}), grpcretry.NewClient(fast))
	s, err := client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Count: 0})
	require.NoError(t, err)
	ids, err := recvAll(s)
	assert.NoError(t, err)
	assert.Empty(t, ids)
}

func TestServerStreamGivesUpWithTheLastStatus(t *testing.T) {
	a := &attempts{script: failFirst(100, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	s, err := client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Count: 1})
	require.NoError(t, err)
	_, err = s.Recv()
	assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	_, again := s.Recv()
	assert.Equal(t, err, again)
	assert.Equal(t, 4, a.Count())
}

func TestServerStreamHeaderFirst(t *testing.T) {
	a := &attempts{script: failFirst(1, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	s, err := client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Count: 2})
	require.NoError(t, err)
	_, err = s.Header()
	require.NoError(t, err)
	ids, err := recvAll(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"ch_1", "ch_2"}, ids)
	assert.Equal(t, 2, a.Count())
}

func TestClientStreamsAreNeverRetried(t *testing.T) {
	a := &attempts{script: failFirst(1, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	up, err := client.Upload(testCtx(t))
	require.NoError(t, err)
	// Send may meet the stream already ended by the server (io.EOF, as
	// grpc-go says it): the status comes with CloseAndRecv.
	if err := up.Send(&paymentspb.ChargeRequest{}); err != nil {
		require.ErrorIs(t, err, io.EOF)
	}
	_, err = up.CloseAndRecv()
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.NotErrorIs(t, err, retry.ErrAttemptsExhausted, "passed through, untouched")
	assert.Equal(t, 1, a.Count())
	assert.Equal(t, []string{""}, a.Keys())
}
