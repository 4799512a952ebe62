package grpcretry

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/exactlyonce/retry/protocol"
)

// Stream is the Client's stream client interceptor (a
// grpc.StreamClientInterceptor).
//
// A server stream (one request, a stream of replies) runs on the retry
// loop until its first reply arrives (or its end, or its header when
// Header is asked for first): an attempt that fails before then is
// retried like a unary call, with a key when its method is not declared
// idempotent; once a reply has been handed to the caller, the stream is
// never opened again, so the caller never sees a reply twice (a failure
// after it ends the stream with its status, as without this interceptor).
// Its request is kept until the first reply, for the retries. The
// caller's grpc.OnFinish callbacks run once, when the stream that answered
// ends (or with the call's error when no attempt answered). Each attempt
// is bounded by the attempt timeout until its first reply; the stream then
// lives until it ends or its context does.
//
// Client streams and bidirectional streams pass through untouched, never
// retried: the messages they sent cannot be taken back, and replaying them
// could repeat their effect.
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	set, err := codesOf(opts)
	if err != nil {
		_, finish := takeOnFinish(opts)
		finish.run(err)
		return nil, err
	}
	if desc.ClientStreams || !desc.ServerStreams {
		return streamer(ctx, desc, cc, method, opts...)
	}
	s := &serverStream{
		c: c, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer,
		call:  protocol.Call{Target: cc.Target(), Method: method, Idempotent: c.methods.info(method).safe(), Hold: true},
		codes: set,
	}
	s.call.Options = policyOf(opts)
	opts, s.finish = takeOnFinish(opts)
	s.opts = append(append([]grpc.CallOption(nil), opts...), grpc.Trailer(&s.trailer))
	s.addKey = true
	if k := ownKey(ctx); k != "" {
		s.call.Key, s.addKey = k, false
	}
	return s, nil
}

// errStreamSend is what a server stream says to a second request message.
var errStreamSend = status.Error(codes.Internal, "grpcretry: a server stream sends one request message")

// serverStream is a server stream through the Client: opened on the retry
// loop at its first RecvMsg (or Header), then the stream of the attempt
// that got the first reply.
type serverStream struct {
	c        *Client
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption // the caller's but grpc.OnFinish, and one that reads the trailer
	call     protocol.Call
	codes    codeSet // the codes retried (RetryableCodes)
	addKey   bool
	finish   callFinish     // the caller's grpc.OnFinish callbacks: run once, when the call ends
	attempt  *attemptFinish // the end of the last attempt's stream, when finish is set

	mu      sync.Mutex // the caller's goroutines (RecvMsg, Header, CloseSend) against start
	req     any        // the request message, until the stream starts
	sent    bool
	closed  bool // CloseSend was called
	started bool
	cs      grpc.ClientStream // the stream that answered; nil before, or when it failed
	trailer metadata.MD       // the last attempt's
	err     error             // the call's failure, for every later RecvMsg
	ended   bool              // the stream ended: its contexts were released
}

// SendMsg keeps the request for the attempts.
func (s *serverStream) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent || s.closed {
		return errStreamSend
	}
	s.req, s.sent = m, true
	return nil
}

// CloseSend notes that the request is complete.
func (s *serverStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// RecvMsg receives the next reply: the first through the retry loop.
func (s *serverStream) RecvMsg(m any) error {
	s.mu.Lock()
	if !s.started {
		err := s.start(m, false)
		s.mu.Unlock()
		return err
	}
	cs, err := s.cs, s.err
	s.mu.Unlock()
	if cs == nil {
		return err
	}
	err = cs.RecvMsg(m)
	if err != nil {
		s.end()
	}
	return err
}

// Header returns the header of the stream, starting it first if need be
// (the loop then ends once the header has arrived).
func (s *serverStream) Header() (metadata.MD, error) {
	s.mu.Lock()
	if !s.started {
		if err := s.start(nil, true); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	cs, err := s.cs, s.err
	s.mu.Unlock()
	if cs == nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // ended well, without a header: as grpc-go says it
		}
		return nil, err
	}
	return cs.Header()
}

// Trailer returns the trailer of the stream that answered, or of the last
// attempt.
func (s *serverStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cs != nil {
		return s.cs.Trailer()
	}
	return s.trailer
}

// Context returns the context of the stream that answered, or the call's.
func (s *serverStream) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cs != nil {
		return s.cs.Context()
	}
	return s.ctx
}

// start runs the loop that opens the stream, until the first reply
// arrives in first (or the stream ends), or, with header, until its header
// arrives; s.mu is held.
func (s *serverStream) start(first any, header bool) error {
	s.started = true
	if !s.sent {
		s.err = status.Error(codes.Internal, "grpcretry: a server stream's request was never sent")
		s.finish.run(s.err)
		return s.err
	}
	var got grpc.ClientStream // the last attempt's stream; nil when it ended at once
	_, err := s.c.caller.Run(s.ctx, &s.call, func(ctx context.Context, _ int, _ bool) protocol.Verdict {
		var v protocol.Verdict
		got, v = s.open(ctx, first, header)
		return v
	})
	s.req = nil
	if err != nil {
		s.err = callErr(err)
		s.finish.run(s.err)
		return s.err
	}
	if s.attempt != nil {
		s.attempt.handOver(s.finish) // the stream that answered ends the call
	}
	s.cs = got
	if got == nil {
		s.err, s.ended = io.EOF, true
		s.call.Release()
		return io.EOF
	}
	return nil
}

// open makes one attempt: opens a stream, sends the request and waits for
// the first reply (or the header). A stream that ended well at once is a
// success with a nil stream.
func (s *serverStream) open(ctx context.Context, first any, header bool) (grpc.ClientStream, protocol.Verdict) {
	ctx = withKey(ctx, &s.call, s.addKey)
	s.trailer = nil
	keyed := s.call.Key != ""
	opts := s.opts
	if s.finish != nil {
		s.attempt = new(attemptFinish)
		opts = append(opts[:len(opts):len(opts)], s.attempt.option())
	}
	cs, err := s.streamer(ctx, s.desc, s.cc, s.method, opts...)
	if err != nil {
		return nil, verdictOf(err, nil, keyed, s.codes)
	}
	if cs.SendMsg(s.req) == nil {
		_ = cs.CloseSend() // an error of either comes with the stream's status
	}
	if header {
		var md metadata.MD
		if md, err = cs.Header(); err == nil && md == nil {
			// The stream ended before any header: grpc-go tells how at
			// the next RecvMsg, which has no message left to decode.
			err = cs.RecvMsg(new(emptypb.Empty))
		}
	} else {
		err = cs.RecvMsg(first)
	}
	switch {
	case err == nil:
		return cs, protocol.Verdict{}
	case errors.Is(err, io.EOF):
		return nil, protocol.Verdict{}
	}
	return nil, verdictOf(err, s.trailer, keyed, s.codes)
}

// end releases the stream's contexts once it ended.
func (s *serverStream) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		s.call.Release()
	}
}
