package grpcretry

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/exactlyonce/retry/protocol"
)

// Unary is the Client's unary client interceptor (a
// grpc.UnaryClientInterceptor): it makes the call on the retry loop. A
// method whose descriptor declares idempotency_level NO_SIDE_EFFECTS or
// IDEMPOTENT is retried as it is; any other gets an idempotency key in its
// metadata (KeyMetadata), the same on every attempt, unless the call
// brings its own. Attempts are hedged when retry.WithHedging is on, each
// copy into a reply of its own, the winner's merged into reply. The
// caller's grpc.OnFinish callbacks run once, when the call is over, with
// the error it returns.
func (c *Client) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	u := &unaryCall{
		keys:   &c.keys,
		method: method, req: req, reply: reply, cc: cc, invoker: invoker,
		call: protocol.Call{Target: cc.Target(), Method: method, Idempotent: c.methods.info(method).safe()},
	}
	u.call.Options = policyOf(opts)
	opts, finish := takeOnFinish(opts)
	var err error
	if u.codes, err = codesOf(opts); err != nil {
		finish.run(err)
		return err
	}
	u.ownKey(ctx)
	_, isProto := reply.(proto.Message)
	// A keyed call goes twice at once only to a target that has shown it
	// honours keys: a server that ignores them would act twice.
	u.call.Hedgeable = isProto && (u.call.Idempotent || c.keys.honours(u.call.Target))
	u.opts = append(append(u.optsBuf[:0], opts...), grpc.Trailer(&u.trailer))
	v, err := c.caller.Run(ctx, &u.call, u.attempt)
	if h, ok := v.Result.(*hedgeCopy); ok {
		h.deliver(reply, opts)
	}
	if err != nil {
		err = callErr(err)
	}
	finish.run(err)
	return err
}

// unaryCall is one unary call through the Client: what each attempt needs.
type unaryCall struct {
	call       protocol.Call
	method     string
	req, reply any
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	opts       []grpc.CallOption // the caller's, and one that reads the trailer
	optsBuf    [4]grpc.CallOption
	trailer    metadata.MD
	codes      codeSet // the codes retried (RetryableCodes)
	keys       *keyTargets
	addKey     bool // the key goes in the attempts' metadata (the caller sent none)
}

// ownKey keeps a key the caller put in the outgoing metadata; a blank one
// is taken out, to be replaced.
func (u *unaryCall) ownKey(ctx context.Context) {
	u.addKey = true
	if k := ownKey(ctx); k != "" {
		u.call.Key, u.addKey = k, false
	}
}

// attempt makes attempt n of the call under ctx.
func (u *unaryCall) attempt(ctx context.Context, _ int, hedge bool) protocol.Verdict {
	ctx = withKey(ctx, &u.call, u.addKey)
	if hedge {
		return u.copy(ctx)
	}
	u.trailer = nil
	counted := u.call.Key != "" && !u.call.Idempotent && u.keys.sending(u.call.Target)
	err := u.invoker(ctx, u.method, u.req, u.reply, u.cc, u.opts...)
	return u.keys.judge(ctx, &u.call, verdictOf(err, u.trailer, u.call.Key != "", u.codes), u.trailer, counted)
}

// copy makes one copy of a hedged attempt, into a reply, header, trailer
// and peer of its own: the other copy runs at the same time.
func (u *unaryCall) copy(ctx context.Context) protocol.Verdict {
	h := &hedgeCopy{reply: u.reply.(proto.Message).ProtoReflect().New().Interface()}
	opts := make([]grpc.CallOption, 0, len(u.opts)+2)
	for _, o := range u.opts {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.PeerCallOption:
			// The caller's: filled from the winning copy.
		default:
			opts = append(opts, o)
		}
	}
	opts = append(opts, grpc.Header(&h.header), grpc.Trailer(&h.trailer), grpc.Peer(&h.peer))
	err := u.invoker(ctx, u.method, u.req, h.reply, u.cc, opts...)
	v := u.keys.judge(ctx, &u.call, verdictOf(err, h.trailer, u.call.Key != "", u.codes), h.trailer, false)
	v.Result = h
	return v
}

// hedgeCopy is what one copy of a hedged attempt received.
type hedgeCopy struct {
	reply           proto.Message
	header, trailer metadata.MD
	peer            peer.Peer
}

// deliver gives the caller what the winning copy received: its reply, and
// its header, trailer and peer to the caller's options that ask for them.
func (h *hedgeCopy) deliver(reply any, opts []grpc.CallOption) {
	if m, ok := reply.(proto.Message); ok {
		proto.Reset(m)
		proto.Merge(m, h.reply)
	}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = h.header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = h.trailer
		case grpc.PeerCallOption:
			*o.PeerAddr = h.peer
		}
	}
}

// ownKey returns the key the caller put in the outgoing metadata, or "".
func ownKey(ctx context.Context) string {
	for _, k := range metadata.ValueFromOutgoingContext(ctx, KeyMetadata) {
		if !blank(k) {
			return k
		}
	}
	return ""
}

// blank reports whether a key value is empty: spaces and tabs, with or
// without an empty pair of quotes.
func blank(v string) bool {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v == "" || v == `""`
}

// withKey adds the call's key to ctx's outgoing metadata, when the Client
// made it. A blank key the caller sent is replaced.
func withKey(ctx context.Context, call *protocol.Call, add bool) context.Context {
	if !add || call.Key == "" {
		return ctx
	}
	if len(metadata.ValueFromOutgoingContext(ctx, KeyMetadata)) > 0 {
		md, _ := metadata.FromOutgoingContext(ctx) // a copy
		md.Set(KeyMetadata, call.Key)
		return metadata.NewOutgoingContext(ctx, md)
	}
	return metadata.AppendToOutgoingContext(ctx, KeyMetadata, call.Key)
}
