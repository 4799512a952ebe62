package grpcretry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// rawCodec keeps the bytes of the reply as they came over the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// dedup is a service behind a ServerInterceptor on the env's Runner, with a
// recovery interceptor outside it (grpc-go lets a panic end the process).
type dedup struct {
	e      *env
	p      *payments
	srv    *server
	cc     *grpc.ClientConn
	client paymentspb.PaymentsClient
}

func newDedup(t *testing.T, tcp bool, e *env, p *payments, opts ...grpcretry.ServerOption) *dedup {
	t.Helper()
	interceptor := grpcretry.NewServerInterceptor(e.runner, byTenant, opts...)
	srv := serve(t, tcp, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(interceptor.Registrar(s), p) },
		grpc.ChainUnaryInterceptor(recoverPanics, interceptor.Unary))
	cc := conn(t, srv, nil)
	return &dedup{e: e, p: p, srv: srv, cc: cc, client: paymentspb.NewPaymentsClient(cc)}
}

// recoverPanics turns a panic into INTERNAL, as a recovery interceptor does.
func recoverPanics(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "recovered: %v", r)
		}
	}()
	return h(ctx, req)
}

// charge calls Charge as tenant with key and returns the raw reply bytes,
// the header, the trailer and the error.
func (d *dedup) charge(t *testing.T, tenant, key string, req *paymentspb.ChargeRequest) ([]byte, metadata.MD, metadata.MD, error) {
	t.Helper()
	var raw []byte
	var header, trailer metadata.MD
	err := d.cc.Invoke(asTenant(testCtx(t), tenant, key), paymentspb.Payments_Charge_FullMethodName, req, &raw,
		grpc.ForceCodec(rawCodec{}), grpc.Header(&header), grpc.Trailer(&trailer))
	return raw, header, trailer, err
}

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == grpcretry.ErrorDomain {
			return ei.Reason
		}
	}
	return ""
}

var charge = &paymentspb.ChargeRequest{Account: "acct", AmountCents: 1200, Labels: map[string]string{"a": "1", "b": "2", "c": "3"}}

// Replay (HTTP: the stored status, header and body byte for byte, plus
// Idempotent-Replayed: true).
func TestRunsOnceAndReplaysByteForByte(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		p := &payments{}
		p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
			grpc.SetHeader(ctx, metadata.Pairs("x-header", "h"))
			grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t", "x-bin", string([]byte{0, 1, 2})))
			return &paymentspb.ChargeReply{Id: "ch_1", Account: req.Account, AmountCents: req.AmountCents, Labels: req.Labels}, nil
		}
		d := newDedup(t, tcp, newEnv(), p)
		noMap := &paymentspb.ChargeRequest{Account: "acct", AmountCents: 1200}
		first, h1, t1, err := d.charge(t, "alice", "k1", noMap)
		require.NoError(t, err)
		again, h2, t2, err := d.charge(t, "alice", "k1", noMap)
		require.NoError(t, err)
		assert.Equal(t, first, again, "the reply, byte for byte")
		assert.EqualValues(t, 1, p.charges.Load())
		// A map's entries have no order in proto's encoding (two sends of
		// one message may differ): the replay is the same message.
		withMap, _, _, err := d.charge(t, "alice", "k2", charge)
		require.NoError(t, err)
		replayed, _, _, err := d.charge(t, "alice", "k2", charge)
		require.NoError(t, err)
		var a, b paymentspb.ChargeReply
		require.NoError(t, proto.Unmarshal(withMap, &a))
		require.NoError(t, proto.Unmarshal(replayed, &b))
		assert.True(t, proto.Equal(&a, &b))
		assert.Len(t, b.Labels, 3)
		assert.Equal(t, h1.Get("x-header"), h2.Get("x-header"))
		assert.Equal(t, t1.Get("x-trailer"), t2.Get("x-trailer"))
		assert.Equal(t, t1.Get("x-bin"), t2.Get("x-bin"))
		assert.Empty(t, t1.Get(grpcretry.ReplayedTrailer))
		assert.Equal(t, []string{"true"}, t2.Get(grpcretry.ReplayedTrailer))
	}
}

// 5xx stored (HTTP: errors after execution began are stored and replayed,
// status, header and body).
func TestFailuresAfterExecutionBeganAreStored(t *testing.T) {
	p := &payments{}
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		idempotency.MarkStarted(ctx)
		grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "t"))
		st, _ := status.New(codes.FailedPrecondition, "card declined").WithDetails(&errdetails.ErrorInfo{Reason: "DECLINED", Domain: "bank"})
		return nil, st.Err()
	}
	d := newDedup(t, false, newEnv(), p)
	_, _, t1, err1 := d.charge(t, "alice", "k", charge)
	_, _, t2, err2 := d.charge(t, "alice", "k", charge)
	require.Error(t, err1)
	assert.Equal(t, status.Convert(err1).Proto().String(), status.Convert(err2).Proto().String(), "code, message and details")
	assert.Equal(t, t1.Get("x-trailer"), t2.Get("x-trailer"))
	assert.Equal(t, []string{"true"}, t2.Get(grpcretry.ReplayedTrailer))
	assert.EqualValues(t, 1, p.charges.Load())
}

// Without a mark, server errors (5xx) are stored; rejections (4xx) are not.
func TestWithoutMarkOnlyClientErrorsAreRejections(t *testing.T) {
	for _, tc := range []struct {
		code   codes.Code
		stored bool
	}{
		{codes.Internal, true}, {codes.Unavailable, true}, {codes.Unknown, true}, {codes.DataLoss, true},
		{codes.DeadlineExceeded, true}, {codes.Unimplemented, true},
		{codes.InvalidArgument, false}, {codes.NotFound, false}, {codes.AlreadyExists, false},
		{codes.PermissionDenied, false}, {codes.FailedPrecondition, false}, {codes.OutOfRange, false},
		{codes.Unauthenticated, false}, {codes.ResourceExhausted, false}, {codes.Aborted, false}, {codes.Canceled, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			p := &payments{}
			p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
				return nil, status.Error(tc.code, "no")
			}
			d := newDedup(t, false, newEnv(), p)
			_, _, _, err := d.charge(t, "alice", "k", charge)
			assert.Equal(t, tc.code, status.Code(err))
			_, _, trailer, err := d.charge(t, "alice", "k", charge)
			assert.Equal(t, tc.code, status.Code(err))
			if tc.stored {
				assert.EqualValues(t, 1, p.charges.Load())
				assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
			} else {
				assert.EqualValues(t, 2, p.charges.Load(), "a rejection frees the key: the retry runs")
			}
		})
	}
}

// 400 (HTTP: a validation error before execution is not stored and frees
// the key, so a corrected retry runs).
func TestRejectionIsNotStoredAndACorrectedRetryRuns(t *testing.T) {
	p := &payments{}
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		if req.AmountCents <= 0 {
			return nil, status.Error(codes.InvalidArgument, "amount must be positive")
		}
		idempotency.MarkStarted(ctx)
		return &paymentspb.ChargeReply{AmountCents: req.AmountCents}, nil
	}
	d := newDedup(t, false, newEnv(), p)
	_, _, _, err := d.charge(t, "alice", "k", &paymentspb.ChargeRequest{})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, _, _, err = d.charge(t, "alice", "k", &paymentspb.ChargeRequest{AmountCents: 5})
	assert.NoError(t, err, "the same key, corrected, runs: the rejection was not stored")
}

// 4xx after the mark (HTTP: stored).
func TestClientErrorsAfterTheMarkAreStored(t *testing.T) {
	p := &payments{}
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		idempotency.MarkStarted(ctx)
		return nil, status.Error(codes.FailedPrecondition, "insufficient funds")
	}
	d := newDedup(t, false, newEnv(), p)
	d.charge(t, "alice", "k", charge)
	_, _, trailer, err := d.charge(t, "alice", "k", charge)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
	assert.EqualValues(t, 1, p.charges.Load())
}

// 400 (HTTP: a missing, malformed or repeated key).
func TestBadKeysAreInvalidArgument(t *testing.T) {
	d := newDedup(t, false, newEnv(), &payments{})
	for _, tc := range []struct {
		name   string
		md     metadata.MD
		reason string
	}{
		{"missing", metadata.Pairs(), grpcretry.ReasonKeyMissing},
		{"empty", metadata.Pairs(grpcretry.KeyMetadata, ""), grpcretry.ReasonKeyInvalid},
		{"too long", metadata.Pairs(grpcretry.KeyMetadata, strings.Repeat("k", 300)), grpcretry.ReasonKeyInvalid},
		{"two values", metadata.Pairs(grpcretry.KeyMetadata, "a", grpcretry.KeyMetadata, "b"), grpcretry.ReasonKeyInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.NewOutgoingContext(testCtx(t), metadata.Join(tc.md, metadata.Pairs(tenantMetadata, "alice")))
			_, err := d.client.Charge(ctx, charge)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Equal(t, tc.reason, reasonOf(err))
		})
	}
	assert.Zero(t, d.p.charges.Load())
}

// 401 (HTTP: the CallerFunc failed).
func TestCallerErrorIsUnauthenticated(t *testing.T) {
	d := newDedup(t, false, newEnv(), &payments{})
	ctx := metadata.AppendToOutgoingContext(testCtx(t), grpcretry.KeyMetadata, "k")
	_, err := d.client.Charge(ctx, charge)
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	assert.Equal(t, grpcretry.ReasonCallerUnknown, reasonOf(err))
}

// 422 (HTTP: the same key with another payload).
func TestAnotherPayloadUnderTheSameKeyIsFailedPrecondition(t *testing.T) {
	d := newDedup(t, false, newEnv(), &payments{})
	_, _, _, err := d.charge(t, "alice", "k", charge)
	require.NoError(t, err)
	other := proto.Clone(charge).(*paymentspb.ChargeRequest)
	other.AmountCents++
	_, _, _, err = d.charge(t, "alice", "k", other)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.Equal(t, grpcretry.ReasonKeyMismatch, reasonOf(err))
	// The same payload with its map in another order is the same call.
	same := &paymentspb.ChargeRequest{Account: "acct", AmountCents: 1200, Labels: map[string]string{"c": "3", "b": "2", "a": "1"}}
	_, _, _, err = d.charge(t, "alice", "k", same)
	assert.NoError(t, err)
	assert.EqualValues(t, 1, d.p.charges.Load())
}

// Tenants (HTTP: keys are scoped by caller; no outcome crosses callers).
func TestCallersAreIsolated(t *testing.T) {
	d := newDedup(t, false, newEnv(), &payments{})
	a, _, _, err := d.charge(t, "alice", "k", charge)
	require.NoError(t, err)
	b, _, trailer, err := d.charge(t, "bob", "k", charge)
	require.NoError(t, err)
	assert.NotEqual(t, a, b, "bob's call ran on its own")
	assert.Empty(t, trailer.Get(grpcretry.ReplayedTrailer))
	assert.EqualValues(t, 2, d.p.charges.Load())
}

// 409 (HTTP: a repeat while the first runs gets 409 with Retry-After).
func TestARepeatWhileTheFirstRunsIsAbortedWithAPushback(t *testing.T) {
	p := &payments{}
	entered, release := make(chan struct{}), make(chan struct{})
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		close(entered)
		<-release
		return &paymentspb.ChargeReply{Id: "first"}, nil
	}
	d := newDedup(t, false, newEnv(), p)
	done := make(chan error)
	go func() {
		_, _, _, err := d.charge(t, "alice", "k", charge)
		done <- err
	}()
	<-entered
	_, _, trailer, err := d.charge(t, "alice", "k", charge)
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, codes.Aborted, status.Code(err))
	assert.Equal(t, grpcretry.ReasonInProgress, reasonOf(err))
	assert.Equal(t, []string{"1000"}, trailer.Get(grpcretry.PushbackMsTrailer), "a hint as long as calls take, at least 1 s")
	var delay time.Duration
	for _, det := range status.Convert(err).Details() {
		if ri, ok := det.(*errdetails.RetryInfo); ok {
			delay = ri.RetryDelay.AsDuration()
		}
	}
	assert.Equal(t, time.Second, delay)
}

// 409 through our client: it waits the first call out and gets its outcome.
func TestConcurrentDuplicatesThroughOurClientGetTheFirstOutcome(t *testing.T) {
	p := &payments{}
	release := make(chan struct{})
	var entered sync.Once
	started := make(chan struct{})
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		entered.Do(func() { close(started) })
		<-release
		return &paymentspb.ChargeReply{Id: fmt.Sprintf("ch_%d", p.charges.Load())}, nil
	}
	e := &env{store: idempotency.NewMemoryStore(nil)}
	e.runner = idempotency.NewRunner(e.store)
	interceptor := grpcretry.NewServerInterceptor(e.runner, byTenant)
	srv := serve(t, true, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, p) }, grpc.ChainUnaryInterceptor(interceptor.Unary))
	waiting := make(chan struct{}, 1)
	client := dial(t, srv, grpcretry.NewClient(fast, retry.WithTrace(&retry.Trace{Decided: func(_ context.Context, a retry.Attempt) {
		if a.Retrying {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}})))
	ctx := asTenant(testCtx(t), "alice", "same-key")
	replies := make(chan *paymentspb.ChargeReply, 2)
	for range 2 {
		go func() {
			r, err := client.Charge(ctx, charge)
			assert.NoError(t, err)
			replies <- r
		}()
	}
	<-started
	<-waiting // the second call was told to wait for the first
	close(release)
	a, b := <-replies, <-replies
	assert.Equal(t, a.Id, b.Id)
	assert.EqualValues(t, 1, p.charges.Load())
}

// TTL (HTTP: a key is free again after its TTL).
func TestKeyIsFreeAfterTTL(t *testing.T) {
	e := newEnv()
	d := newDedup(t, false, e, &payments{})
	d.charge(t, "alice", "k", charge)
	e.clock.Add(testTTL - 1)
	_, _, trailer, _ := d.charge(t, "alice", "k", charge)
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
	e.clock.Add(1)
	other := proto.Clone(charge).(*paymentspb.ChargeRequest)
	other.AmountCents = 1
	_, _, trailer, err := d.charge(t, "alice", "k", other)
	require.NoError(t, err, "the old record is gone: even another payload runs")
	assert.Empty(t, trailer.Get(grpcretry.ReplayedTrailer))
	assert.EqualValues(t, 2, d.p.charges.Load())
}

// Lease fencing (HTTP: a stale lease is taken over; the late holder's
// completion is refused with 409 lease lost).
func TestStaleLeaseIsTakenOverAndLateCompletionRefused(t *testing.T) {
	e := newEnv()
	p := &payments{}
	entered := make(chan int64, 2)
	release := make(chan struct{})
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		ex := idempotency.FromContext(ctx)
		entered <- ex.Attempt()
		if ex.Attempt() == 1 {
			<-release
		}
		idempotency.MarkStarted(ctx)
		return &paymentspb.ChargeReply{Id: fmt.Sprintf("attempt %d", ex.Attempt())}, nil
	}
	d := newDedup(t, false, e, p)
	firstDone := make(chan error)
	go func() {
		_, _, _, err := d.charge(t, "alice", "k", charge)
		firstDone <- err
	}()
	require.EqualValues(t, 1, <-entered)
	e.clock.Add(testLease / 2)
	_, _, _, err := d.charge(t, "alice", "k", charge)
	assert.Equal(t, codes.Aborted, status.Code(err))
	assert.Equal(t, grpcretry.ReasonInProgress, reasonOf(err))
	e.clock.Add(testLease)
	second, _, _, err := d.charge(t, "alice", "k", charge)
	require.NoError(t, err)
	require.EqualValues(t, 2, <-entered)
	close(release)
	late := <-firstDone
	assert.Equal(t, codes.Aborted, status.Code(late))
	assert.Equal(t, grpcretry.ReasonLeaseLost, reasonOf(late))
	again, _, _, err := d.charge(t, "alice", "k", charge)
	require.NoError(t, err)
	assert.Equal(t, second, again)
}

// Panics (HTTP: a panicking handler stores a 500; the panic goes on).
func TestPanickingHandlerStoresInternal(t *testing.T) {
	p := &payments{}
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		panic("boom")
	}
	d := newDedup(t, false, newEnv(), p)
	_, _, _, err := d.charge(t, "alice", "k", charge)
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "recovered: boom", "the panic went on, to the recovery interceptor")
	_, _, trailer, err := d.charge(t, "alice", "k", charge)
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Equal(t, grpcretry.ReasonPanicked, reasonOf(err))
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
	assert.EqualValues(t, 1, p.charges.Load())
}

// Responses over the limit (HTTP: a 500 problem is stored instead).
func TestOutcomeOverTheLimitStoresInternal(t *testing.T) {
	p := &payments{}
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		return &paymentspb.ChargeReply{Id: string(make([]byte, 2048))}, nil
	}
	d := newDedup(t, false, newEnv(), p, grpcretry.WithMaxResponseSize(1024))
	_, _, _, err := d.charge(t, "alice", "k", charge)
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Equal(t, grpcretry.ReasonResponseTooBig, reasonOf(err))
	_, _, _, err = d.charge(t, "alice", "k", charge)
	assert.Equal(t, grpcretry.ReasonResponseTooBig, reasonOf(err))
	assert.EqualValues(t, 1, p.charges.Load())
}

// failingStore fails every claim, transiently or for good.
type failingStore struct {
	idempotency.Store
	err error
}

func (f failingStore) Claim(context.Context, idempotency.ClaimRequest) (idempotency.Claim, error) {
	return idempotency.Claim{}, f.err
}

// 503 and 500 (HTTP: a store failure a retry may get past is 503 with
// Retry-After; a permanent one 500).
func TestStoreFailures(t *testing.T) {
	for _, tc := range []struct {
		err      error
		code     codes.Code
		pushback []string
	}{
		{errors.New("connection refused"), codes.Unavailable, []string{"1000"}},
		{retry.Permanent(errors.New("key too long for the store")), codes.Internal, nil},
	} {
		e := newEnv()
		e.runner = idempotency.NewRunner(failingStore{Store: e.store, err: tc.err})
		d := newDedup(t, false, e, &payments{})
		_, _, trailer, err := d.charge(t, "alice", "k", charge)
		assert.Equal(t, tc.code, status.Code(err))
		assert.Equal(t, grpcretry.ReasonStoreFailed, reasonOf(err))
		assert.Equal(t, tc.pushback, trailer.Get(grpcretry.PushbackMsTrailer))
		assert.Zero(t, d.p.charges.Load())
	}
}

// Safe methods (HTTP: GET passes through; PUT is deduplicated with a key,
// passes through without).
func TestDeclaredIdempotencyDecidesWhatIsDeduplicated(t *testing.T) {
	d := newDedup(t, false, newEnv(), &payments{})
	ctx := metadata.AppendToOutgoingContext(testCtx(t), tenantMetadata, "alice")
	_, err := d.client.GetCharge(ctx, &paymentspb.GetChargeRequest{Id: "x"})
	assert.NoError(t, err, "NO_SIDE_EFFECTS: no key needed")
	_, err = d.client.SetLimit(ctx, &paymentspb.SetLimitRequest{LimitCents: 1})
	assert.NoError(t, err, "IDEMPOTENT: no key needed")
	var trailer metadata.MD
	keyed := metadata.AppendToOutgoingContext(ctx, grpcretry.KeyMetadata, "k")
	d.client.SetLimit(keyed, &paymentspb.SetLimitRequest{LimitCents: 1})
	_, err = d.client.SetLimit(keyed, &paymentspb.SetLimitRequest{LimitCents: 1}, grpc.Trailer(&trailer))
	assert.NoError(t, err)
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer), "IDEMPOTENT with a key: deduplicated")
}

func TestOptionalKeys(t *testing.T) {
	d := newDedup(t, false, newEnv(), &payments{}, grpcretry.WithOptionalKeys())
	ctx := metadata.AppendToOutgoingContext(testCtx(t), tenantMetadata, "alice")
	_, err := d.client.Charge(ctx, charge)
	assert.NoError(t, err)
}

func TestKeyHeaderIsConfigurable(t *testing.T) {
	d := newDedup(t, false, newEnv(), &payments{}, grpcretry.WithKeyHeader("X-Request-Id"))
	ctx := metadata.AppendToOutgoingContext(testCtx(t), tenantMetadata, "alice", "x-request-id", "r1")
	d.client.Charge(ctx, charge)
	var trailer metadata.MD
	_, err := d.client.Charge(ctx, charge, grpc.Trailer(&trailer))
	require.NoError(t, err)
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
}

func TestHandlerSeesTheExecutionAndItsSteps(t *testing.T) {
	p := &payments{}
	var downstream []string
	var mu sync.Mutex
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		ex := idempotency.FromContext(ctx)
		require.NotNil(t, ex)
		id, err := ex.Step(ctx, "charge", func(ctx context.Context, key string) ([]byte, error) {
			mu.Lock()
			downstream = append(downstream, key)
			mu.Unlock()
			return []byte("ch_from_bank"), nil
		})
		if err != nil {
			return nil, err
		}
		return &paymentspb.ChargeReply{Id: string(id)}, nil
	}
	d := newDedup(t, false, newEnv(), p)
	raw, _, _, err := d.charge(t, "alice", "k", charge)
	require.NoError(t, err)
	var reply paymentspb.ChargeReply
	require.NoError(t, proto.Unmarshal(raw, &reply))
	assert.Equal(t, "ch_from_bank", reply.Id)
	assert.Equal(t, []string{idempotency.DownstreamKey("alice", "k", "charge")}, downstream)
}

func TestReasonsAreTheProblemCodes(t *testing.T) {
	for reason, code := range map[string]string{
		grpcretry.ReasonKeyMissing: "idempotency_key_missing", grpcretry.ReasonKeyInvalid: "idempotency_key_invalid",
		grpcretry.ReasonKeyMismatch: "idempotency_key_mismatch", grpcretry.ReasonInProgress: "idempotency_key_in_progress",
		grpcretry.ReasonLeaseLost: "idempotency_lease_lost", grpcretry.ReasonCallerUnknown: "caller_unknown",
		grpcretry.ReasonStoreFailed: "idempotency_store_failed", grpcretry.ReasonTxFailed: "transaction_rolled_back",
		grpcretry.ReasonResponseTooBig: "response_too_large", grpcretry.ReasonPanicked: "handler_panicked",
	} {
		assert.Equal(t, reason, upper(code))
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
