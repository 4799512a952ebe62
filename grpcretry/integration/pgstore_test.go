package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
)

// newStore is a pgstore.Store on a fresh schema (dropped at cleanup) with
// a charges table for the handler's own writes.
func newStore(t *testing.T) (*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "grpcretry_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	require.NoError(t, pgstore.Migrate(ctx, pool, schema))
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	_, err = pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, "charges"}.Sanitize()+" (id serial PRIMARY KEY, account text NOT NULL, cents bigint NOT NULL)")
	require.NoError(t, err)
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	require.NoError(t, err)
	return store, pool, schema
}

// ledger writes each charge through the transaction pgstore gives the
// handler (pgstore.TxFrom), committed with the stored outcome.
type ledger struct {
	paymentspb.UnimplementedPaymentsServer
	schema string
	fail   atomic.Bool // the next charge's statement fails
	runs   atomic.Int64
}

func (l *ledger) Charge(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
	l.runs.Add(1)
	tx, ok := pgstore.TxFrom(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no transaction")
	}
	idempotency.MarkStarted(ctx)
	table := pgx.Identifier{l.schema, "charges"}.Sanitize()
	if l.fail.Swap(false) {
		// Written, then a serialization failure, as under contention.
		tx.Exec(ctx, "INSERT INTO "+table+" (account, cents) VALUES ($1, $2)", req.Account, req.AmountCents)
		_, err := tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$")
		return nil, status.Error(codes.Internal, err.Error())
	}
	var id int64
	if err := tx.QueryRow(ctx, "INSERT INTO "+table+" (account, cents) VALUES ($1, $2) RETURNING id", req.Account, req.AmountCents).Scan(&id); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &paymentspb.ChargeReply{Id: fmt.Sprintf("ch_%d", id), Account: req.Account, AmountCents: req.AmountCents}, nil
}

func rows(t *testing.T, pool *pgxpool.Pool, schema string) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "charges"}.Sanitize()).Scan(&n))
	return n
}

// The handler's writes commit with the stored outcome, in pgstore's
// transaction: a repeat gets the stored reply and writes nothing.
func TestHandlerWritesCommitWithTheOutcome(t *testing.T) {
	store, pool, schema := newStore(t)
	l := &ledger{schema: schema}
	runner := idempotency.NewRunner(store)
	dedup := grpcretry.NewServerInterceptor(runner, grpcretry.SingleTenant)
	client := serve(t, l, nil, nil, dedup.Unary)
	ctx := metadata.AppendToOutgoingContext(context.Background(), grpcretry.KeyMetadata, "charge-1")
	first, err := client.Charge(ctx, &paymentspb.ChargeRequest{Account: "acct", AmountCents: 700})
	require.NoError(t, err)
	var trailer metadata.MD
	again, err := client.Charge(ctx, &paymentspb.ChargeRequest{Account: "acct", AmountCents: 700}, grpc.Trailer(&trailer))
	require.NoError(t, err)
	assert.Equal(t, first.Id, again.Id)
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
	assert.Equal(t, 1, rows(t, pool, schema))
	assert.EqualValues(t, 1, l.runs.Load())
}

// A failed statement (a serialization failure) rolls everything back and
// stores nothing, whatever the handler answered: the client
// gets UNAVAILABLE with a pushback, and our client's retry runs afresh.
func TestFailedStatementIsRetriedAfresh(t *testing.T) {
	store, pool, schema := newStore(t)
	l := &ledger{schema: schema}
	l.fail.Store(true)
	runner := idempotency.NewRunner(store)
	dedup := grpcretry.NewServerInterceptor(runner, grpcretry.SingleTenant)
	var report retry.Report
	retrying := grpcretry.NewClient(retry.WithBackoff(backoff.Constant(0)))
	client := serve(t, l, retrying, nil, dedup.Unary)
	reply, err := client.Charge(context.Background(), &paymentspb.ChargeRequest{Account: "acct", AmountCents: 5},
		grpcretry.CallPolicy(retry.WithReport(&report)))
	require.NoError(t, err)
	assert.Equal(t, 2, report.Attempts)
	assert.Equal(t, "ch_2", reply.Id, "the first insert was rolled back (its serial value spent)")
	assert.Equal(t, 1, rows(t, pool, schema))
	assert.EqualValues(t, 2, l.runs.Load())

	// Without our client, the status says why.
	l.fail.Store(true)
	ctx := metadata.AppendToOutgoingContext(context.Background(), grpcretry.KeyMetadata, "charge-2")
	var trailer metadata.MD
	_, err = serve(t, l, nil, nil, dedup.Unary).Charge(ctx, &paymentspb.ChargeRequest{Account: "b", AmountCents: 1}, grpc.Trailer(&trailer))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, []string{"1000"}, trailer.Get(grpcretry.PushbackMsTrailer))
	assert.False(t, errors.Is(err, retry.ErrAttemptsExhausted))
}
