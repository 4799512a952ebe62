package grpcretry

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

func TestOutcomeRoundTrips(t *testing.T) {
	for _, o := range []outcome{
		{status: &spb.Status{}, reply: []byte{1, 2, 3}, hasReply: true},
		{status: &spb.Status{}, reply: nil, hasReply: true},
		{status: &spb.Status{Code: 14, Message: "down"}, header: metadata.Pairs("a", "1", "a", "2"), trailer: metadata.Pairs("x-bin", "\x00\xff")},
	} {
		b, err := o.encode(nil)
		require.NoError(t, err)
		got, err := decodeOutcome(b)
		require.NoError(t, err)
		assert.True(t, proto.Equal(o.status, got.status))
		assert.Equal(t, o.hasReply, got.hasReply)
		assert.Equal(t, len(o.reply), len(got.reply))
		assert.Equal(t, len(o.header), len(got.header))
		for k, v := range o.trailer {
			assert.Equal(t, v, got.trailer[k])
		}
	}
}

// FuzzDecodeOutcome feeds whatever a store might hand back: decoding never
// panics, and what decodes encodes back to the same bytes.
func FuzzDecodeOutcome(f *testing.F) {
	ok, _ := (&outcome{status: &spb.Status{}, reply: []byte("r"), hasReply: true, trailer: metadata.Pairs("t", "v")}).encode(nil)
	failed, _ := (&outcome{status: &spb.Status{Code: 13, Message: "m"}}).encode(nil)
	f.Add(ok)
	f.Add(failed)
	f.Add([]byte{})
	f.Add([]byte{outcomeVersion, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := decodeOutcome(b)
		if err != nil {
			return
		}
		again, err := o.encode(nil)
		require.NoError(t, err)
		o2, err := decodeOutcome(again)
		require.NoError(t, err)
		assert.True(t, proto.Equal(o.status, o2.status))
		assert.Equal(t, o.reply, o2.reply)
	})
}

// FuzzDecodeStoredCall: a stored call never panics the Reconciler.
func FuzzDecodeStoredCall(f *testing.F) {
	f.Add([]byte{storedCallVersion, 3, '/', 'a', 'b', 0, 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		method, _, body, err := decodeCall(b)
		if err == nil {
			assert.NotEmpty(t, method)
			assert.LessOrEqual(t, len(body), len(b))
		}
	})
}

// FuzzPushback: any trailer value either gives a wait or stops, never both.
func FuzzPushback(f *testing.F) {
	for _, s := range []string{"0", "100", "-1", "x", "99999999999999999999", " 5", "+5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		wait, ok, stop := pushbackMs([]string{s})
		assert.False(t, ok && stop)
		assert.True(t, ok || stop)
		assert.GreaterOrEqual(t, int64(wait), int64(0))
	})
}
