package grpcretry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// failFirst fails the first n calls with err.
func failFirst(n int, err error) func(int, string) error {
	return func(i int, _ string) error {
		if i <= n {
			return err
		}
		return nil
	}
}

var unavailable = status.Error(codes.Unavailable, "down for a moment")

func TestChargeCarriesOneKeyOnEveryAttempt(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		a := &attempts{script: failFirst(2, unavailable)}
		p := &payments{}
		client := dial(t, servePayments(t, tcp, p, a), grpcretry.NewClient(fast))
		var report retry.Report
		reply, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{Account: "acct", AmountCents: 500},
			grpcretry.CallPolicy(retry.WithReport(&report)))
		require.NoError(t, err)
		assert.Equal(t, int64(500), reply.AmountCents)
		keys := a.Keys()
		require.Len(t, keys, 3)
		assert.Regexp(t, `^"[0-9a-f-]{36}"$`, keys[0])
		assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "the same key on every attempt")
		assert.Equal(t, 3, report.Attempts)
		assert.Equal(t, keys[0], report.IdempotencyKey)
		assert.EqualValues(t, 1, p.charges.Load())
	}
}

func TestDeclaredIdempotentMethodsCarryNoKey(t *testing.T) {
	a := &attempts{script: failFirst(1, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{Id: "ch_1"})
	require.NoError(t, err)
	_, err = client.SetLimit(testCtx(t), &paymentspb.SetLimitRequest{LimitCents: 9})
	require.NoError(t, err)
	assert.Equal(t, []string{"", "", ""}, a.Keys(), "NO_SIDE_EFFECTS and IDEMPOTENT methods are retried as they are")
}

func TestOwnKeyIsKept(t *testing.T) {
	a := &attempts{script: func(n int, _ string) error {
		if n%2 == 1 {
			return unavailable
		}
		return nil
	}}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	ctx := metadata.AppendToOutgoingContext(testCtx(t), grpcretry.KeyMetadata, "order-42")
	_, err := client.Charge(ctx, &paymentspb.ChargeRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{"order-42", "order-42"}, a.Keys())

	blank := metadata.AppendToOutgoingContext(testCtx(t), grpcretry.KeyMetadata, `""`)
	_, err = client.Charge(blank, &paymentspb.ChargeRequest{})
	require.NoError(t, err)
	keys := a.Keys()[2:]
	assert.Regexp(t, `^"[0-9a-f-]{36}"$`, keys[0], "a blank key is replaced")
	assert.Equal(t, keys[0], keys[1])
}

func TestWithoutKeysAnAmbiguousFailureIsNotRepeated(t *testing.T) {
	a := &attempts{script: failFirst(1, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast, retry.WithoutKeys()))
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrNotIdempotent)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, 1, a.Count())
}

// withTrailer is a status error whose call also gets trailer md.
func withTrailer(err error, md metadata.MD) func(context.Context) error {
	return func(ctx context.Context) error {
		grpc.SetTrailer(ctx, md)
		return err
	}
}

func withDetails(code codes.Code, details ...*errdetails.RetryInfo) error {
	st := status.New(code, "with details")
	for _, d := range details {
		st, _ = st.WithDetails(d)
	}
	return st.Err()
}

func TestClassificationByStatus(t *testing.T) {
	retryInfo := &errdetails.RetryInfo{RetryDelay: durationpb.New(5 * time.Millisecond)}
	for _, tc := range []struct {
		name     string
		fail     func(context.Context) error
		method   string // "charge" (keyed), "get" (NO_SIDE_EFFECTS)
		attempts int    // attempts made against a server that always fails
		reason   error
	}{
		{name: "UNAVAILABLE", fail: constant(unavailable), method: "charge", attempts: 4, reason: retry.ErrAttemptsExhausted},
		{name: "UNAVAILABLE, no side effects", fail: constant(unavailable), method: "get", attempts: 4, reason: retry.ErrAttemptsExhausted},
		{name: "DEADLINE_EXCEEDED of an attempt", fail: constant(status.Error(codes.DeadlineExceeded, "slow")), method: "get", attempts: 4, reason: retry.ErrAttemptsExhausted},
		{name: "RESOURCE_EXHAUSTED", fail: constant(status.Error(codes.ResourceExhausted, "quota")), method: "get", attempts: 1, reason: retry.ErrPermanent},
		{name: "RESOURCE_EXHAUSTED with pushback", method: "get", attempts: 4, reason: retry.ErrAttemptsExhausted,
			fail: withTrailer(status.Error(codes.ResourceExhausted, "quota"), metadata.Pairs(grpcretry.PushbackMsTrailer, "5"))},
		{name: "RESOURCE_EXHAUSTED with RetryInfo", method: "get", attempts: 4, reason: retry.ErrAttemptsExhausted,
			fail: constant(withDetails(codes.ResourceExhausted, retryInfo))},
		{name: "ABORTED, keyed", fail: constant(status.Error(codes.Aborted, "conflict")), method: "charge", attempts: 4, reason: retry.ErrAttemptsExhausted},
		{name: "ABORTED, not keyed", fail: constant(status.Error(codes.Aborted, "conflict")), method: "get", attempts: 1, reason: retry.ErrPermanent},
		{name: "INTERNAL", fail: constant(status.Error(codes.Internal, "bug")), method: "get", attempts: 1, reason: retry.ErrPermanent},
		{name: "UNKNOWN", fail: constant(errors.New("plain error")), method: "get", attempts: 1, reason: retry.ErrPermanent},
		{name: "INVALID_ARGUMENT", fail: constant(status.Error(codes.InvalidArgument, "bad")), method: "charge", attempts: 1, reason: retry.ErrPermanent},
		{name: "NOT_FOUND", fail: constant(status.Error(codes.NotFound, "none")), method: "get", attempts: 1, reason: retry.ErrPermanent},
		{name: "UNIMPLEMENTED", fail: constant(status.Error(codes.Unimplemented, "no")), method: "get", attempts: 1, reason: retry.ErrPermanent},
		{name: "negative pushback", method: "get", attempts: 1, reason: retry.ErrPushback,
			fail: withTrailer(unavailable, metadata.Pairs(grpcretry.PushbackMsTrailer, "-1"))},
		{name: "malformed pushback", method: "get", attempts: 1, reason: retry.ErrPushback,
			fail: withTrailer(unavailable, metadata.Pairs(grpcretry.PushbackMsTrailer, "soon"))},
		{name: "two pushbacks", method: "get", attempts: 1, reason: retry.ErrPushback,
			fail: withTrailer(unavailable, metadata.Pairs(grpcretry.PushbackMsTrailer, "1", grpcretry.PushbackMsTrailer, "2"))},
		{name: "our services' pushback", method: "get", attempts: 1, reason: retry.ErrPushback,
			fail: withTrailer(unavailable, metadata.Pairs(grpcretry.PushbackTrailer, "exhausted"))},
		{name: "a replayed failure", method: "charge", attempts: 1, reason: retry.ErrPermanent,
			fail: withTrailer(unavailable, metadata.Pairs(grpcretry.ReplayedTrailer, "true"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &payments{}
			fail := func(ctx context.Context, _ *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
				return nil, tc.fail(ctx)
			}
			p.charge = fail
			a := &attempts{}
			srv := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, &failing{p, fail}) },
				grpc.ChainUnaryInterceptor(a.unary))
			client := dial(t, srv, grpcretry.NewClient(fast))
			var err error
			if tc.method == "charge" {
				_, err = client.Charge(testCtx(t), &paymentspb.ChargeRequest{})
			} else {
				_, err = client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
			}
			assert.Equal(t, tc.attempts, a.Count())
			assert.ErrorIs(t, err, tc.reason)
			want := tc.fail(context.Background())
			assert.Equal(t, status.Convert(want).Proto().String(), status.Convert(err).Proto().String(),
				"the caller gets the last status as the server sent it")
			var rerr *retry.Error
			require.ErrorAs(t, err, &rerr)
			assert.Equal(t, tc.attempts, rerr.Attempts)
		})
	}
}

func constant(err error) func(context.Context) error {
	return func(context.Context) error { return err }
}

// failing is payments whose GetCharge fails like its Charge.
type failing struct {
	*payments
	fail func(context.Context, *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error)
}

func (f *failing) GetCharge(ctx context.Context, _ *paymentspb.GetChargeRequest) (*paymentspb.ChargeReply, error) {
	return f.fail(ctx, nil)
}

func TestPushbackAndRetryInfoAreFloorsOfTheNextWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(context.Context) error
		want time.Duration
	}{
		{"pushback", withTrailer(unavailable, metadata.Pairs(grpcretry.PushbackMsTrailer, "30")), 30 * time.Millisecond},
		{"RetryInfo", constant(withDetails(codes.Unavailable, &errdetails.RetryInfo{RetryDelay: durationpb.New(20 * time.Millisecond)})), 20 * time.Millisecond},
		{"both: the longer", func(ctx context.Context) error {
			grpc.SetTrailer(ctx, metadata.Pairs(grpcretry.PushbackMsTrailer, "10"))
			return withDetails(codes.Unavailable, &errdetails.RetryInfo{RetryDelay: durationpb.New(25 * time.Millisecond)})
		}, 25 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			p := &payments{}
			fail := func(ctx context.Context, _ *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
				if n.Add(1) == 1 {
					return nil, tc.fail(ctx)
				}
				return &paymentspb.ChargeReply{}, nil
			}
			srv := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, &failing{p, fail}) })
			var delays []time.Duration
			trace := retry.WithTrace(&retry.Trace{Decided: func(_ context.Context, a retry.Attempt) {
				if a.Retrying {
					delays = append(delays, a.Delay)
				}
			}})
			client := dial(t, srv, grpcretry.NewClient(retry.WithBackoff(backoff.Constant(time.Millisecond)), trace))
			_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{tc.want}, delays)
		})
	}
}

func TestPushbackIsCappedAndNeverSleptPastTheDeadline(t *testing.T) {
	p := &payments{}
	long := withTrailer(unavailable, metadata.Pairs(grpcretry.PushbackMsTrailer, "3600000"))
	fail := func(ctx context.Context, _ *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		return nil, long(ctx)
	}
	srv := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, &failing{p, fail}) })
	client := dial(t, srv, grpcretry.NewClient(fast))
	start := time.Now()
	_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrRetryAfterTooLong, "an hour is over the cap of retry.WithMaxRetryAfter")

	short := withTrailer(unavailable, metadata.Pairs(grpcretry.PushbackMsTrailer, "5000"))
	fail2 := func(ctx context.Context, _ *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		return nil, short(ctx)
	}
	srv2 := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, &failing{p, fail2}) })
	client2 := dial(t, srv2, grpcretry.NewClient(fast))
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	_, err = client2.GetCharge(ctx, &paymentspb.GetChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrDeadline, "5 s asked with 2 s left: handed back at once")
	assert.Equal(t, codes.Unavailable, status.Code(err), "the server's status, unchanged")
	assert.Less(t, time.Since(start), 30*time.Second) // a sanity bound, not a timing assertion
}

func TestCallPolicyAndNewContext(t *testing.T) {
	a := &attempts{script: failFirst(100, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{}, grpcretry.CallPolicy(retry.WithoutRetries()))
	assert.Error(t, err)
	assert.Equal(t, 1, a.Count())
	assert.Equal(t, []string{""}, a.Keys(), "WithoutRetries sends no key")
	_, err = client.Charge(retry.NewContext(testCtx(t), retry.WithMaxAttempts(2)), &paymentspb.ChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	assert.Equal(t, 3, a.Count())
}

func TestInsideDoOneAttemptPerAttemptWithTheLoopsKey(t *testing.T) {
	a := &attempts{script: failFirst(2, unavailable)}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	calls := 0
	err := retry.Do(testCtx(t), func(ctx context.Context) error {
		calls++
		_, err := client.Charge(ctx, &paymentspb.ChargeRequest{})
		return err
	}, fast)
	require.NoError(t, err)
	assert.Equal(t, 3, calls, "the outer loop decides; the call makes one attempt each time")
	keys := a.Keys()
	require.Len(t, keys, 3)
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys)
}

func TestInsideDoAFinalStatusStopsTheOuterLoop(t *testing.T) {
	a := &attempts{script: failFirst(100, status.Error(codes.InvalidArgument, "bad"))}
	client := dial(t, servePayments(t, false, &payments{}, a), grpcretry.NewClient(fast))
	err := retry.Do(testCtx(t), func(ctx context.Context) error {
		_, err := client.Charge(ctx, &paymentspb.ChargeRequest{})
		return err
	}, fast)
	assert.ErrorIs(t, err, retry.ErrPermanent)
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Equal(t, 1, a.Count())
}

func TestAttemptTimeoutCutsAHungAttempt(t *testing.T) {
	p := &payments{}
	var n atomic.Int64
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		if n.Add(1) == 1 {
			<-ctx.Done() // hangs until the client gives up on the attempt
			return nil, ctx.Err()
		}
		return &paymentspb.ChargeReply{Id: "second"}, nil
	}
	client := dial(t, servePayments(t, false, p, &attempts{}), grpcretry.NewClient(fast, retry.WithAttemptTimeout(50*time.Millisecond)))
	reply, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{})
	require.NoError(t, err)
	assert.Equal(t, "second", reply.Id)
}

func TestAttemptTimeoutOfTheLastAttemptIsDeadlineExceeded(t *testing.T) {
	p := &payments{}
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	client := dial(t, servePayments(t, false, p, &attempts{}),
		grpcretry.NewClient(fast, retry.WithAttemptTimeout(20*time.Millisecond), retry.WithMaxAttempts(2)))
	// Without a deadline the attempt timeout is the only bound of the last
	// attempt; with one, the last attempt runs to it (no other can follow).
	_, err := client.Charge(t.Context(), &paymentspb.ChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	assert.ErrorAs(t, err, new(*retry.AttemptTimeoutError))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
}

func TestHedgedCallKeepsTheWinnersReplyAndMetadata(t *testing.T) {
	p := &payments{}
	var n atomic.Int64
	release := make(chan struct{})
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		if req.Account == "warm-up" {
			return &paymentspb.ChargeReply{}, nil
		}
		mine := n.Add(1)
		grpc.SetHeader(ctx, metadata.Pairs("copy", string(rune('0'+mine))))
		if mine == 1 {
			select { // the slow copy
			case <-ctx.Done():
			case <-release:
			}
			return nil, status.Error(codes.Unavailable, "slow")
		}
		return &paymentspb.ChargeReply{Id: "fast", Labels: map[string]string{"copy": "2"}}, nil
	}
	defer close(release)
	a := &attempts{}
	client := dial(t, servePayments(t, false, p, a),
		grpcretry.NewClient(fast, retry.WithHedging(retry.Hedging{MinDelay: 20 * time.Millisecond})))
	// A keyed call is hedged once its target has shown it honours keys.
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{Account: "warm-up"})
	require.NoError(t, err)
	var header metadata.MD
	reply, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{}, grpc.Header(&header))
	require.NoError(t, err)
	assert.Equal(t, "fast", reply.Id)
	assert.Equal(t, map[string]string{"copy": "2"}, reply.Labels)
	assert.Equal(t, []string{"2"}, header.Get("copy"), "the caller's Header option gets the winner's")
	keys := a.Keys()[1:] // after the warm-up's
	require.Len(t, keys, 2)
	assert.Equal(t, keys[0], keys[1], "both copies carry the call's key")
}

func TestRidingThroughADeadTarget(t *testing.T) {
	a := &attempts{script: failFirst(1000, unavailable)}
	retrying := grpcretry.NewClient(fast, retry.WithMaxAttempts(1))
	client := dial(t, servePayments(t, false, &payments{}, a), retrying)
	for range 8 { // 15 ms apart: the first probe is due 100 ms after the last
		time.Sleep(15 * time.Millisecond)
		_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
		require.Error(t, err)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	before := a.Count()
	_, err := client.GetCharge(ctx, &paymentspb.GetChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrDependencyDown)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.LessOrEqual(t, a.Count()-before, 1, "while the target is down only a probe goes out")
	deps := retrying.Dependencies()
	require.Len(t, deps, 1)
	assert.Equal(t, "passthrough:///bufconn", deps[0].Name)
	assert.Equal(t, "down", deps[0].State)
}

func TestBudgetIsOnByDefault(t *testing.T) {
	retrying := grpcretry.NewClient()
	require.NotNil(t, retrying.Budget())
	assert.Equal(t, 20.0, retrying.Budget().Stats().Capacity) // the default budget: NewBudget(0.1, 1, 20)
}
