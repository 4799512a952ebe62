package grpcretry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// encodeV1 encodes a success as version 1 stored it: without the reply's
// type.
func encodeV1(t *testing.T, reply []byte) []byte {
	st, err := proto.Marshal(&spb.Status{})
	require.NoError(t, err)
	b := appendBytes([]byte{outcomeVersionV1}, st)
	b = appendBytes(append(b, 1), reply)
	return appendMD(appendMD(b, nil), nil)
}

// Outcomes stored before the reply's type was stored with it still
// replay: as the method's reply type when its descriptor is registered,
// else as their bytes.
func TestVersion1OutcomesStillReplay(t *testing.T) {
	want := &paymentspb.ChargeReply{Id: "ch_1", Account: "acct", AmountCents: 1200}
	raw, err := proto.Marshal(want)
	require.NoError(t, err)
	var ms methods

	x := &exchange{out: ms.info(paymentspb.Payments_Charge_FullMethodName)}
	got, err := x.replay(context.Background(), encodeV1(t, raw), true)
	require.NoError(t, err)
	require.IsType(t, &paymentspb.ChargeReply{}, got)
	assert.True(t, proto.Equal(want, got.(proto.Message)))

	x = &exchange{out: ms.info("/handwritten.Ledger/Post")}
	got, err = x.replay(context.Background(), encodeV1(t, raw), true)
	require.NoError(t, err)
	again, err := proto.Marshal(got.(proto.Message))
	require.NoError(t, err)
	assert.Equal(t, raw, again, "a reply of no known type is replayed as its bytes")
}

func TestOutcomeKeepsTheReplyType(t *testing.T) {
	o := outcome{status: &spb.Status{}, reply: []byte{10, 1, 'x'}, replyType: "exactlyonce.grpcretry.payments.ChargeReply", hasReply: true}
	b, err := o.encode(nil)
	require.NoError(t, err)
	got, err := decodeOutcome(b)
	require.NoError(t, err)
	assert.Equal(t, o.replyType, got.replyType)
	assert.Equal(t, o.reply, got.reply)
}
