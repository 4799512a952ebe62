package grpcretry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// failedOut is the verdict of a keyed attempt that failed in a way that
// may have reached its target (a reset after the call was sent).
func failedOut() protocol.Verdict {
	return protocol.Verdict{Err: status.Error(codes.Unavailable, "connection reset"), Retry: true, Failing: true}
}

// judgeLater judges, in a goroutine, the failure of call a (counted as out)
// and returns where its verdict will come.
func judgeLater(ctx context.Context, k *keyTargets, a *protocol.Call) <-chan protocol.Verdict {
	done := make(chan protocol.Verdict, 1)
	go func() { done <- k.judge(ctx, a, failedOut(), nil, true) }()
	return done
}

// A keyed call that failed after it may have reached a target not known
// yet waits while another keyed call is out to it, and is retried once
// that call's answer echoes its key; it fails (ErrNotIdempotent) once the
// other's answer shows keys ignored, or once the other failed without
// showing anything; and it waits at most evidenceWait, or until its
// context ends.
func TestAKeyedFailureWaitsForTheCallsOut(t *testing.T) {
	cases := []struct {
		name string
		// other ends the other call: what its answer showed.
		other     func(k *keyTargets, b *protocol.Call)
		wantRetry bool
	}{
		{"echoed", func(k *keyTargets, b *protocol.Call) {
			k.judge(context.Background(), b, protocol.Verdict{}, metadata.Pairs(KeyMetadata, b.Key), true)
		}, true},
		{"replayed", func(k *keyTargets, b *protocol.Call) {
			k.judge(context.Background(), b, protocol.Verdict{}, metadata.Pairs(ReplayedTrailer, "true"), true)
		}, true},
		{"success without echo", func(k *keyTargets, b *protocol.Call) {
			k.judge(context.Background(), b, protocol.Verdict{}, nil, true)
		}, false},
		{"failed too", func(k *keyTargets, b *protocol.Call) {
			k.judge(context.Background(), b, protocol.Verdict{Err: status.Error(codes.Internal, "boom")}, nil, true)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var k keyTargets
				a := &protocol.Call{Target: "pay", Key: "a"}
				b := &protocol.Call{Target: "pay", Key: "b"}
				assert.True(t, k.sending("pay"))
				assert.True(t, k.sending("pay"))
				done := judgeLater(t.Context(), &k, a)
				synctest.Wait()
				select {
				case v := <-done:
					t.Fatalf("did not wait for the call out: %+v", v)
				default:
				}
				c.other(&k, b)
				v := <-done
				assert.Equal(t, c.wantRetry, v.Retry)
				if !c.wantRetry {
					assert.ErrorIs(t, v.Stop, retry.ErrNotIdempotent)
				}
				assert.Empty(t, k.unknown, "an entry outlived the calls out")
			})
		})
	}
	t.Run("alone", func(t *testing.T) {
		var k keyTargets
		assert.True(t, k.sending("pay"))
		v := k.judge(context.Background(), &protocol.Call{Target: "pay", Key: "a"}, failedOut(), nil, true)
		assert.ErrorIs(t, v.Stop, retry.ErrNotIdempotent, "nothing out to show anything")
	})
	t.Run("bounded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var k keyTargets
			k.sending("pay")
			k.sending("pay") // out, and never answered
			start := time.Now()
			v := <-judgeLater(t.Context(), &k, &protocol.Call{Target: "pay", Key: "a"})
			assert.ErrorIs(t, v.Stop, retry.ErrNotIdempotent)
			assert.Equal(t, evidenceWait, time.Since(start))
		})
	})
	t.Run("context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var k keyTargets
			k.sending("pay")
			k.sending("pay")
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			v := <-judgeLater(ctx, &k, &protocol.Call{Target: "pay", Key: "a"})
			assert.ErrorIs(t, v.Stop, retry.ErrNotIdempotent)
			assert.Equal(t, time.Second, time.Since(start))
		})
	})
}
