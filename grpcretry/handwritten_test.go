package grpcretry_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// ledgerService is a hand-written service: its descriptor is in no
// registry, so the interceptor cannot learn its reply type from it.
const ledgerService = "handwritten.Ledger"

// ledgerDesc is a hand-written grpc.ServiceDesc with one unary method,
// Post, whose handler answers what reply returns.
func ledgerDesc(reply func(req *paymentspb.ChargeRequest) proto.Message) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: ledgerService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Post",
			Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				req := new(paymentspb.ChargeRequest)
				if err := dec(req); err != nil {
					return nil, err
				}
				h := func(_ context.Context, req any) (any, error) { return reply(req.(*paymentspb.ChargeRequest)), nil }
				if interceptor == nil {
					return h(ctx, req)
				}
				return interceptor(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/" + ledgerService + "/Post"}, h)
			},
		}},
	}
}

// unregisteredReply returns replies of a dynamic message type that no
// registry knows, with a string field 1 and an int64 field 2, and a way to
// make an empty one.
func unregisteredReply(t *testing.T) (func(req *paymentspb.ChargeRequest) proto.Message, func() proto.Message) {
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("handwritten/entry.proto"),
		Package: proto.String("handwritten"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Entry"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("id"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("id")},
				{Name: proto.String("cents"), Number: proto.Int32(2), Type: descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("cents")},
			},
		}},
	}, nil)
	require.NoError(t, err)
	md := fd.Messages().Get(0)
	var n atomic.Int64
	return func(req *paymentspb.ChargeRequest) proto.Message {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().Get(0), protoreflect.ValueOfString("entry_"+string(rune('0'+n.Add(1)))))
		m.Set(md.Fields().Get(1), protoreflect.ValueOfInt64(req.AmountCents))
		return m
	}, func() proto.Message { return dynamicpb.NewMessage(md) }
}

// A service without a registered descriptor (a hand-written
// grpc.ServiceDesc) runs each keyed call once and replays its reply,
// whatever the reply's type: a generated one (byte for byte), or one no
// registry knows (the same message: a dynamic message's fields are encoded
// in no set order, so two encodings of it may differ there, as the first
// send and the stored copy do).
func TestReplaysAServiceWithoutARegisteredDescriptor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(t *testing.T) (func(*paymentspb.ChargeRequest) proto.Message, func() proto.Message)
	}{
		{"generated reply type", func(*testing.T) (func(*paymentspb.ChargeRequest) proto.Message, func() proto.Message) {
			var n atomic.Int64
			return func(req *paymentspb.ChargeRequest) proto.Message {
				return &paymentspb.ChargeReply{Id: "ch_" + string(rune('0'+n.Add(1))), Account: req.Account, AmountCents: req.AmountCents}
			}, nil
		}},
		{"unregistered reply type", unregisteredReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, empty := tc.reply(t)
			var runs atomic.Int64
			interceptor := grpcretry.NewServerInterceptor(newEnv().runner, byTenant)
			srv := serve(t, false, func(s *grpc.Server) {
				s.RegisterService(ledgerDesc(func(req *paymentspb.ChargeRequest) proto.Message {
					runs.Add(1)
					return reply(req)
				}), struct{}{})
			}, grpc.ChainUnaryInterceptor(interceptor.Unary))
			cc := conn(t, srv, nil)
			post := func(key string) ([]byte, metadata.MD, error) {
				var raw []byte
				var trailer metadata.MD
				err := cc.Invoke(asTenant(testCtx(t), "alice", key), "/"+ledgerService+"/Post",
					&paymentspb.ChargeRequest{Account: "acct", AmountCents: 700}, &raw,
					grpc.ForceCodec(rawCodec{}), grpc.Trailer(&trailer))
				return raw, trailer, err
			}
			first, _, err := post("k1")
			require.NoError(t, err)
			require.NotEmpty(t, first)
			for range 2 {
				again, trailer, err := post("k1")
				require.NoError(t, err, "a repeat of the key gets the stored reply")
				if empty == nil {
					assert.Equal(t, first, again, "byte for byte")
				} else {
					want, got := empty(), empty()
					require.NoError(t, proto.Unmarshal(first, want))
					require.NoError(t, proto.Unmarshal(again, got))
					assert.True(t, proto.Equal(want, got), "the same message")
				}
				assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
			}
			assert.EqualValues(t, 1, runs.Load(), "executed once")
		})
	}
}
