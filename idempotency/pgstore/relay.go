package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeliverFunc delivers one outbox message. A nil error means delivered; the
// message may still be delivered again (at least once), always with the same
// OutboxMessage.ID, so the receiver deduplicates on it.
type DeliverFunc func(ctx context.Context, m OutboxMessage) error

// Relay moves outbox messages to their destination, at least once, in order
// of enqueueing within each batch. Several relays (on several instances) may
// run at once: each batch is claimed with FOR UPDATE SKIP LOCKED in a
// transaction that stays open while the batch is delivered, so no two relays
// hold the same message, and a relay that dies mid-batch (killed, its
// connection dropped) leaves its undelivered messages to the next relay.
type Relay struct {
	// Store holds the outbox. Required.
	Store *Store
	// Deliver sends one message. Required.
	Deliver DeliverFunc
	// Batch is how many messages one transaction claims (default 100).
	Batch int
	// Interval is the pause after a short or failed batch (default one second).
	Interval time.Duration
	// MaxFailures, when positive, parks a message after that many failed
	// deliveries: it is set aside (parked_at in the outbox table, with its
	// last error) so that it no longer holds back the messages after it. Set
	// parked_at back to NULL to deliver it again. Zero means retry forever,
	// keeping the order strict.
	MaxFailures int
	// OnError, if set, is told of each failed batch; the relay carries on.
	OnError func(error)
}

// Run delivers batches until ctx ends, then returns ctx.Err().
func (r *Relay) Run(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = time.Second
	}
	return every(ctx, interval, func(ctx context.Context) bool {
		n, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil && r.OnError != nil {
			r.OnError(err)
		}
		return err == nil && n == r.batch() // a full batch: more may be waiting
	})
}

func (r *Relay) batch() int {
	if r.Batch <= 0 {
		return 100
	}
	return r.Batch
}

// RunOnce claims one batch of undelivered messages, delivers them in order,
// and marks the delivered ones, all in one transaction. It stops at the first
// failed delivery (recording the failure on that message; a message parked
// by MaxFailures is passed over instead) or when ctx ends, and returns how
// many messages it delivered with the first failure. If Deliver panics, the
// transaction is rolled back and the whole batch will be delivered again. The
// transaction stays open while Deliver runs: bound it with ctx.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	tx, err := r.Store.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: relay: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	batch, seqs, err := r.claim(ctx, tx)
	if err != nil || len(batch) == 0 {
		return 0, err
	}
	var (
		delivered []int64
		failure   error
	)
	// Record what happens even when ctx ends, so delivered messages are not
	// sent again.
	end := context.WithoutCancel(ctx)
	for i, m := range batch {
		if err := ctx.Err(); err != nil {
			failure = errors.Join(failure, err)
			break
		}
		err := r.Deliver(ctx, m)
		if err == nil {
			delivered = append(delivered, seqs[i])
			continue
		}
		err = fmt.Errorf("pgstore: relay: deliver %s: %w", m.ID, err)
		if failure == nil {
			failure = err
		}
		var parked bool
		if err := tx.QueryRow(end, r.Store.q.markFailed, seqs[i], errorText(err), r.MaxFailures).Scan(&parked); err != nil {
			return 0, errors.Join(failure, fmt.Errorf("pgstore: relay: mark failed: %w", err))
		}
		if !parked {
			break // keep the order: the rest waits for this one
		}
	}
	if len(delivered) > 0 {
		if _, err := tx.Exec(end, r.Store.q.markDelivered, delivered); err != nil {
			return 0, errors.Join(failure, fmt.Errorf("pgstore: relay: mark delivered: %w", err))
		}
	}
	if err := tx.Commit(end); err != nil {
		return 0, errors.Join(failure, fmt.Errorf("pgstore: relay: commit: %w", err))
	}
	return len(delivered), failure
}

// claim locks the next batch of undelivered messages, skipping those another
// relay holds.
func (r *Relay) claim(ctx context.Context, tx pgx.Tx) ([]OutboxMessage, []int64, error) {
	rows, err := tx.Query(ctx, r.Store.q.claimOutbox, r.batch())
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: relay: claim: %w", err)
	}
	var (
		batch []OutboxMessage
		seqs  []int64
	)
	for rows.Next() {
		var (
			m   OutboxMessage
			seq int64
			f   int32
		)
		if err := rows.Scan(&seq, &m.ID, &m.Topic, &m.Payload, &m.CreatedAt, &f); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("pgstore: relay: claim: %w", err)
		}
		m.Failures = int(f)
		batch = append(batch, m)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pgstore: relay: claim: %w", err)
	}
	return batch, seqs, nil
}

// errorText is err's text as a text column takes it: without NUL bytes, and
// with invalid UTF-8 replaced, so that recording a failure never fails.
func errorText(err error) string {
	return strings.ToValidUTF8(strings.ReplaceAll(err.Error(), "\x00", ""), "\uFFFD")
}
