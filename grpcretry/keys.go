package grpcretry

import (
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// keyTargets are the targets that have shown they honour idempotency keys:
// an answer to a keyed call echoed its key in the trailer (the
// ServerInterceptor's answers all do) or replayed a stored outcome. A
// keyed call is repeated after a failure that may have reached its target
// only once the target has shown it: a server that ignores keys would act
// again. Safe for concurrent use; the zero value knows none.
type keyTargets struct {
	mu       sync.RWMutex
	honoured map[string]struct{}
}

// honours reports whether target has shown it honours keys.
func (k *keyTargets) honours(target string) bool {
	k.mu.RLock()
	_, ok := k.honoured[target]
	k.mu.RUnlock()
	return ok
}

// saw notes that target has shown it honours keys.
func (k *keyTargets) saw(target string) {
	if k.honours(target) {
		return
	}
	k.mu.Lock()
	if k.honoured == nil {
		k.honoured = make(map[string]struct{})
	}
	k.honoured[target] = struct{}{}
	k.mu.Unlock()
}

// judge judges a keyed attempt's verdict v by what its target has shown,
// learning from the attempt's trailer: a failure that may have reached a
// target not known to honour keys is not retried (retry.ErrNotIdempotent);
// one that proves the call never left (its connection could not be made)
// is.
func (k *keyTargets) judge(call *protocol.Call, v protocol.Verdict, trailer metadata.MD) protocol.Verdict {
	if call.Idempotent || call.Key == "" {
		return v
	}
	if len(trailer[ReplayedTrailer]) > 0 || echoed(trailer, call.Key) {
		k.saw(call.Target)
		return v
	}
	if !v.Retry {
		return v
	}
	if k.honours(call.Target) || neverSent(v.Err) {
		return v
	}
	v.Retry, v.Pending, v.Stop = false, false, retry.ErrNotIdempotent
	return v
}

// echoed reports whether trailer echoes key in KeyMetadata.
func echoed(trailer metadata.MD, key string) bool {
	for _, v := range trailer[KeyMetadata] {
		if v == key {
			return true
		}
	}
	return false
}

// neverSent reports whether err proves the call never reached its target:
// grpc-go could not make the connection.
func neverSent(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable && strings.Contains(st.Message(), "while dialing")
}
