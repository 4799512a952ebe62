package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batchMember is the transaction of one execution in a pgBatch.
type batchMember struct {
	b       *pgBatch
	f       idempotency.Fence
	tx      *lazyTx
	holding bool // the member holds b.mu and its savepoint is open
	ended   bool
}

// take gives the member's transaction the batch's connection: it waits
// for the batch, begins its transaction if need be, and opens the
// member's savepoint, in one round trip.
func (m *batchMember) take(ctx context.Context) (*pgxpool.Conn, error) {
	b := m.b
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return nil, errBatchClosed
	case b.failed != nil:
		err := b.failed
		b.mu.Unlock()
		return nil, fmt.Errorf("%w (the batch's transaction failed: %w)", errAborted, err)
	}
	sql := "SAVEPOINT " + memberSavepoint
	if b.conn == nil {
		c, err := b.s.pool.Acquire(ctx)
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
		b.conn = c
		sql = "BEGIN; " + sql
	}
	if _, err := b.conn.Exec(ctx, sql); err != nil {
		b.failed = err
		b.mu.Unlock()
		return nil, err
	}
	m.holding = true
	return b.conn, nil
}

// Context returns ctx carrying the member's transaction; take it out with
// TxFrom.
func (m *batchMember) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, pgx.Tx(m.tx))
}

// Err returns the first failure of a statement made through the member's
// transaction, or nil.
func (m *batchMember) Err() error { return m.tx.err() }

// Complete adds the outcome to the batch. A member that wrote locally runs
// its fenced update in its savepoint and releases it (one round trip),
// failing with idempotency.ErrLeaseLost, with its savepoint rolled back,
// when the fence no longer holds; one that did not leaves the update to
// Commit.
func (m *batchMember) Complete(ctx context.Context, response []byte) error {
	if m.ended {
		return pgx.ErrTxClosed
	}
	m.ended = true
	m.tx.closed = true
	b := m.b
	if err := m.tx.err(); err != nil {
		rerr := m.undo(ctx)
		return errors.Join(fmt.Errorf("pgstore: complete: %w: %w", idempotency.ErrTxFailed, err), rerr)
	}
	if !m.holding {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			return errBatchClosed
		}
		b.pending = append(b.pending, completion{f: m.f, response: response})
		return nil
	}
	q := &pgx.Batch{}
	q.Queue(b.s.q.completeTx, []byte(m.f.Caller), []byte(m.f.Key), m.f.Attempt, response, m.f.Generation, b.s.now())
	q.Queue("RELEASE SAVEPOINT " + memberSavepoint)
	br := b.conn.SendBatch(ctx, q)
	_, errUpdate := br.Exec()
	_, errRelease := br.Exec()
	if err := errors.Join(errUpdate, errRelease, br.Close()); err != nil {
		rerr := m.undo(ctx)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(errUpdate, &pgErr) && pgErr.Code == leaseLostCode:
			return errors.Join(idempotency.ErrLeaseLost, rerr)
		case errors.As(errUpdate, &pgErr) && pgErr.Code == errAborted.Code:
			return errors.Join(fmt.Errorf("pgstore: complete: %w: %w", idempotency.ErrTxFailed, err), rerr)
		}
		return errors.Join(fmt.Errorf("pgstore: complete: %w", classify(err)), rerr)
	}
	b.done = append(b.done, m.f)
	m.holding = false
	b.mu.Unlock()
	return nil
}

// Rollback abandons the member's writes; a no-op once it ended.
func (m *batchMember) Rollback(ctx context.Context) error {
	if m.ended {
		return nil
	}
	m.ended = true
	m.tx.closed = true
	return m.undo(ctx)
}

// undo rolls the member's savepoint back and lets the batch go, when the
// member holds it. A failure leaves the batch's transaction unable to
// commit.
func (m *batchMember) undo(ctx context.Context) error {
	if !m.holding {
		return nil
	}
	b := m.b
	m.holding = false
	defer b.mu.Unlock()
	_, err := b.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT "+memberSavepoint+"; RELEASE SAVEPOINT "+memberSavepoint)
	if err != nil {
		b.failed = err
		return fmt.Errorf("pgstore: rollback: %w", err)
	}
	return nil
}
