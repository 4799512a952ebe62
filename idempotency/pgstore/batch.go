package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ idempotency.BatchStore = (*Store)(nil)

// memberSavepoint is the savepoint of the batch member that holds the
// batch's connection (one at a time).
const memberSavepoint = "eo_batch_member"

// errBatchClosed is returned by the methods of a closed batch.
var errBatchClosed = errors.New("pgstore: the batch is closed")

// BeginBatch opens a batch of completions. It sends nothing to the server
// until a member writes locally or the batch commits.
//
// The members' local writes (TxFrom) share the batch's one transaction and
// connection: a member takes the connection with its first statement,
// inside a savepoint of its own, and keeps it until its execution
// completes or rolls back; another member's first statement waits for it
// meanwhile. Do the local writes at the end of a handler, after its calls
// to other services. A member that completes checks its fence inside its
// savepoint, which locks its record until the batch commits; one that
// wrote nothing locally is completed by Commit's fenced update.
func (s *Store) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &pgBatch{s: s}, nil
}

// pgBatch is the Store's idempotency.BatchTx.
type pgBatch struct {
	s *Store
	// mu is held by the member whose savepoint is open on conn, and by
	// Commit and Close.
	mu      sync.Mutex
	conn    *pgxpool.Conn // nil until the transaction is begun
	pending []completion  // outcomes of members that wrote nothing locally
	done    []idempotency.Fence
	// failed is why the transaction can no longer commit (a member's
	// savepoint could not be rolled back), or nil.
	failed error
	closed bool
}

// completion is an outcome waiting for the batch's Commit.
type completion struct {
	f        idempotency.Fence
	response []byte
}

// Begin starts the transaction of the execution fenced by f in the batch.
func (b *pgBatch) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	m := &batchMember{b: b, f: f}
	m.tx = &lazyTx{pool: b.s.pool, take: m.take}
	return m, nil
}

// Commit sends the fenced updates of the outcomes of members that wrote
// nothing locally and COMMIT in one round trip (in the transaction the
// members' savepoints are in, if any).
func (b *pgBatch) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pending, done := b.pending, b.done
	b.pending, b.done = nil, nil
	results := make([]idempotency.BatchResult, 0, len(pending)+len(done))
	fail := func(err error) ([]idempotency.BatchResult, error) {
		for _, c := range pending {
			results = append(results, idempotency.BatchResult{Fence: c.f, Err: err})
		}
		for _, f := range done {
			results = append(results, idempotency.BatchResult{Fence: f, Err: err})
		}
		return results, err
	}
	if b.closed {
		return fail(errBatchClosed)
	}
	if b.failed != nil {
		err := fmt.Errorf("pgstore: batch commit: %w: %w", idempotency.ErrTxFailed, b.failed)
		b.failed = nil
		b.end(ctx, true)
		return fail(err)
	}
	if len(pending) == 0 && b.conn == nil {
		return results, nil
	}
	n := len(pending)
	callers, keys, responses := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	attempts, generations := make([]int64, n), make([]int64, n)
	for i, c := range pending {
		callers[i], keys[i], responses[i] = []byte(c.f.Caller), []byte(c.f.Key), c.response
		attempts[i], generations[i] = c.f.Attempt, c.f.Generation
	}
	stored := make(map[idempotency.Fence]bool, n)
	completeArgs := []any{callers, keys, attempts, responses, generations, b.s.now()}
	readInto := func(rows pgx.Rows) error { return readStored(rows, nil, stored) }
	var err error
	if b.conn == nil {
		// One statement, in a transaction of its own.
		var conn *pgxpool.Conn
		if conn, err = b.s.pool.Acquire(ctx); err == nil {
			err = queryAndCommit(ctx, conn, []string{"BEGIN"}, b.s.bq.complete, completeArgs, readInto)
			conn.Release()
		}
	} else {
		// The members' savepoints are in the transaction: the update and
		// COMMIT in one round trip.
		if n > 0 {
			err = queryAndCommit(ctx, b.conn, nil, b.s.bq.complete, completeArgs, readInto)
		} else {
			var tag pgconn.CommandTag
			if tag, err = b.conn.Exec(ctx, "COMMIT"); err == nil && tag.String() == "ROLLBACK" {
				err = pgx.ErrTxCommitRollback
			}
		}
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			err = fmt.Errorf("%w: %w", idempotency.ErrTxFailed, err)
		}
		b.end(ctx, err != nil)
	}
	if err != nil {
		return fail(fmt.Errorf("pgstore: batch commit: %w", classify(err)))
	}
	for _, c := range pending {
		var cerr error
		if !stored[c.f] {
			cerr = idempotency.ErrLeaseLost
		}
		results = append(results, idempotency.BatchResult{Fence: c.f, Err: cerr})
	}
	for _, f := range done {
		results = append(results, idempotency.BatchResult{Fence: f})
	}
	return results, nil
}

// recordKey is a record's caller and key.
type recordKey struct{ caller, key string }

// readStored reads the fences of the records the set-based completion
// stored (rows, or the query's error) into stored. A fence, not the key
// alone: of two completions of one key in a batch (an execution that
// outlived its lease and the one that took over), only the one whose
// fence holds is stored.
func readStored(rows pgx.Rows, err error, stored map[idempotency.Fence]bool) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			caller, key         []byte
			attempt, generation int64
		)
		if err := rows.Scan(&caller, &key, &attempt, &generation); err != nil {
			return err
		}
		stored[idempotency.Fence{Caller: string(caller), Key: string(key), Attempt: attempt, Generation: generation}] = true
	}
	return rows.Err()
}

// Close rolls back what was not committed and ends the batch.
func (b *pgBatch) Close(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.pending, b.done = true, nil, nil
	return b.end(ctx, true)
}

// end returns the batch's connection to the pool, rolling back first when
// asked and the transaction is open. b.mu is held.
func (b *pgBatch) end(ctx context.Context, rollback bool) error {
	conn := b.conn
	b.conn = nil
	if conn == nil {
		return nil
	}
	defer conn.Release()
	if rollback && conn.Conn().PgConn().TxStatus() != 'I' {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			return fmt.Errorf("pgstore: rollback: %w", err)
		}
	}
	return nil
}
