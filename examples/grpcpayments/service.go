package main

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// ledger is the payment provider behind the service: it records every
// charge it performs, duplicates included, by the caller's reference (the
// charge request's account field carries it).
type ledger struct {
	mu       sync.Mutex
	byRef    map[string]int
	executed int
}

func newLedger() *ledger { return &ledger{byRef: make(map[string]int)} }

func (l *ledger) charge(ref string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.executed++
	l.byRef[ref]++
	return fmt.Sprintf("ch_%06d", l.executed)
}

// totals returns how many charges were performed and for how many distinct
// references.
func (l *ledger) totals() (executed, distinct int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.executed, len(l.byRef)
}

// service is the payment service: Charge charges the ledger once per call
// that reaches it. Behind grpcretry's server interceptor, a call that
// carries a key reaches it once per key; one without passes through (the
// interceptor runs WithOptionalKeys, so that a client without keys is
// served too).
type service struct {
	paymentspb.UnimplementedPaymentsServer
	ledger *ledger
}

func (s *service) Charge(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
	if req.AmountCents <= 0 {
		return nil, status.Error(codes.InvalidArgument, "the amount must be positive")
	}
	idempotency.MarkStarted(ctx)
	id := s.ledger.charge(req.Account)
	return &paymentspb.ChargeReply{Id: id, Account: req.Account, AmountCents: req.AmountCents}, nil
}
