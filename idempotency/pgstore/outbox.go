package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs one query returning one row; pgx.Tx, *pgx.Conn and
// *pgxpool.Pool implement it.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// OutboxMessage is one outbox message as a Relay delivers it.
type OutboxMessage struct {
	// ID is the message's stable id (a UUID), the same on every delivery:
	// consumers use it as their idempotency key.
	ID        string
	Topic     string
	Payload   []byte
	CreatedAt time.Time
	// Failures counts earlier failed deliveries of this message.
	Failures int
}

// Enqueue writes a follow-on message to the outbox through q, normally the
// execution's transaction (TxFrom), so the message exists exactly when the
// effects that caused it committed. It returns the message's stable id.
func (s *Store) Enqueue(ctx context.Context, q Querier, topic string, payload []byte) (string, error) {
	if payload == nil {
		payload = []byte{}
	}
	var id string
	if err := q.QueryRow(ctx, s.q.enqueue, topic, payload).Scan(&id); err != nil {
		return "", fmt.Errorf("pgstore: enqueue: %w", classify(err))
	}
	return id, nil
}

// PurgeDelivered deletes up to limit messages (limit <= 0: all) delivered
// more than olderThan ago, and returns how many it deleted.
func (s *Store) PurgeDelivered(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	var lim any
	if limit > 0 {
		lim = int64(limit)
	}
	tag, err := s.pool.Exec(ctx, s.q.purge, lim, olderThan.Microseconds(), s.now())
	if err != nil {
		return 0, fmt.Errorf("pgstore: purge delivered: %w", classify(err))
	}
	return int(tag.RowsAffected()), nil
}
