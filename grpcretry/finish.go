package grpcretry

import (
	"sync"

	"google.golang.org/grpc"
)

// callFinish holds the caller's grpc.OnFinish callbacks, which gRPC runs
// once per call: the attempts never see them, and the interceptor runs
// them once, with the call's own error, when the call is over.
type callFinish []func(error)

// takeOnFinish returns opts without their grpc.OnFinish options, and the
// callbacks of those; opts itself when it has none.
func takeOnFinish(opts []grpc.CallOption) ([]grpc.CallOption, callFinish) {
	n := 0
	for _, o := range opts {
		if _, ok := o.(grpc.OnFinishCallOption); ok {
			n++
		}
	}
	if n == 0 {
		return opts, nil
	}
	rest := make([]grpc.CallOption, 0, len(opts)-n)
	funcs := make(callFinish, 0, n)
	for _, o := range opts {
		if f, ok := o.(grpc.OnFinishCallOption); ok {
			funcs = append(funcs, f.OnFinish)
		} else {
			rest = append(rest, o)
		}
	}
	return rest, funcs
}

// run tells every callback the call ended with err.
func (f callFinish) run(err error) {
	for _, fn := range f {
		fn(err)
	}
}

// attemptFinish is the grpc.OnFinish of one attempt of a server stream:
// gRPC says when the attempt's stream ended. The attempt that answered
// hands its end to the caller's callbacks (handOver); the others' ends are
// nobody's business.
type attemptFinish struct {
	mu     sync.Mutex
	ended  bool
	err    error
	caller callFinish // set by handOver
}

// option is the grpc.OnFinish option of the attempt.
func (a *attemptFinish) option() grpc.CallOption { return grpc.OnFinish(a.done) }

// done is called by gRPC, once, when the attempt's stream ends.
func (a *attemptFinish) done(err error) {
	a.mu.Lock()
	a.ended, a.err = true, err
	caller := a.caller
	a.mu.Unlock()
	caller.run(err)
}

// handOver makes the attempt's end the call's: the caller's callbacks run
// when the stream ends, or now if it has ended.
func (a *attemptFinish) handOver(caller callFinish) {
	a.mu.Lock()
	a.caller = caller
	ended, err := a.ended, a.err
	a.mu.Unlock()
	if ended {
		caller.run(err)
	}
}
