package grpcretry

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// evidenceWait bounds how long a keyed call that may have reached a target
// not known yet to honour keys waits for the answers of the other keyed
// calls out to it (see keyTargets.await): the ride-through's default
// MaxWait, and never past the attempt's own context.
const evidenceWait = 10 * time.Second

// keyTargets are what the targets keyed calls went to have shown of their
// handling of idempotency keys: an answer to a keyed call echoed its key in
// the trailer (the ServerInterceptor's answers all do) or replayed a stored
// outcome (honoured), or succeeded with neither (ignored). A keyed call is
// repeated after a failure that may have reached its target only once the
// target has shown it honours keys: a server that ignores keys would act
// again. Meanwhile such a call waits for the keyed calls still out to the
// target to show it. Safe for concurrent use; the zero value knows none. A
// target it knows is looked up under a read lock.
type keyTargets struct {
	mu       sync.RWMutex
	honoured map[string]struct{}
	ignored  map[string]struct{}
	// unknown holds, for each target not known yet, the keyed calls out to
	// it: an entry lives while one is out.
	unknown map[string]*unknownTarget
}

// unknownTarget counts the keyed calls out to a target not known yet.
type unknownTarget struct {
	out int
	// settled, made by the first call that waits, is closed when the
	// target shows its handling of keys or no call is out to it any more.
	settled chan struct{}
}

// honours reports whether target has shown it honours keys.
func (k *keyTargets) honours(target string) bool {
	k.mu.RLock()
	_, ok := k.honoured[target]
	k.mu.RUnlock()
	return ok
}

// sending notes that a keyed call goes to target, and reports whether it
// is counted as out (the target's handling is unknown): if so, judge must
// be told so once its answer or failure is in.
func (k *keyTargets) sending(target string) bool {
	k.mu.RLock()
	_, h := k.honoured[target]
	_, i := k.ignored[target]
	k.mu.RUnlock()
	if h || i {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.honoured[target]; ok {
		return false
	}
	if _, ok := k.ignored[target]; ok {
		return false
	}
	if k.unknown == nil {
		k.unknown = make(map[string]*unknownTarget)
	}
	u := k.unknown[target]
	if u == nil {
		u = &unknownTarget{}
		k.unknown[target] = u
	}
	u.out++
	return true
}

// answered records what a keyed call to target showed (honoured, ignored,
// or neither) and, when sending counted it, that it is out no more. A
// target that has shown it honours keys is not taken back.
func (k *keyTargets) answered(target string, counted, honoured, ignored bool) {
	if !counted && !honoured && !ignored {
		return
	}
	if !counted && honoured && k.honours(target) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case honoured:
		if k.honoured == nil {
			k.honoured = make(map[string]struct{})
		}
		k.honoured[target] = struct{}{}
		delete(k.ignored, target)
	case ignored:
		if _, ok := k.honoured[target]; !ok {
			if k.ignored == nil {
				k.ignored = make(map[string]struct{})
			}
			k.ignored[target] = struct{}{}
		}
	}
	u := k.unknown[target]
	if u == nil {
		return
	}
	if counted && u.out > 0 {
		u.out--
	}
	if honoured || ignored || u.out == 0 {
		if u.settled != nil {
			close(u.settled)
		}
		delete(k.unknown, target)
	}
}

// await waits, for a keyed call that failed in a way that may have reached
// target, for the keyed calls still out to it to show whether it honours
// keys, and reports whether it does. It gives up at once when the target
// has shown it ignores keys or no keyed call is out to it, and when what
// is out ends without showing it; it waits at most evidenceWait, and not
// past ctx.
func (k *keyTargets) await(ctx context.Context, target string) bool {
	var timeout <-chan time.Time
	for {
		settled, known := k.settledOf(target)
		if known || settled == nil {
			return k.honours(target)
		}
		if timeout == nil {
			t := time.NewTimer(evidenceWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return false
		case <-timeout:
			return false
		}
	}
}

// settledOf returns, for a target not known yet with keyed calls out to
// it, a channel closed when that changes; known reports that the target's
// handling is known.
func (k *keyTargets) settledOf(target string) (settled <-chan struct{}, known bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.honoured[target]; ok {
		return nil, true
	}
	if _, ok := k.ignored[target]; ok {
		return nil, true
	}
	u := k.unknown[target]
	if u == nil || u.out == 0 {
		return nil, false
	}
	if u.settled == nil {
		u.settled = make(chan struct{})
	}
	return u.settled, false
}

// judge judges a keyed attempt's verdict v by what its target has shown,
// learning from the attempt's trailer (counted: sending counted the
// attempt as out). A failure that may have reached a target not known to
// honour keys waits for the other keyed calls out to it (await, under
// ctx) and is not retried (retry.ErrNotIdempotent) unless they show it
// does; one that proves the call never left (its connection could not be
// made) is retried.
func (k *keyTargets) judge(ctx context.Context, call *protocol.Call, v protocol.Verdict, trailer metadata.MD, counted bool) protocol.Verdict {
	if call.Idempotent || call.Key == "" {
		return v
	}
	shown := len(trailer[ReplayedTrailer]) > 0 || echoed(trailer, call.Key)
	k.answered(call.Target, counted, shown, !shown && v.Err == nil)
	if shown || !v.Retry {
		return v
	}
	if k.honours(call.Target) || neverSent(v.Err) || k.await(ctx, call.Target) {
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
