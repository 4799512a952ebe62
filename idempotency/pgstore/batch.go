package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// ClaimBatch claims every request as Claim does, with the claim statements
// pipelined in one round trip and one transaction (one commit). A request
// that a concurrent claim raced (its statement found no row) is claimed
// again alone. When a statement fails, nothing of the batch is claimed.
// The statements run in the order of the requests' caller and key, so two
// batches claiming the same keys take their rows' locks in one order.
func (s *Store) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	for _, req := range reqs {
		if req.Lease <= 0 || req.TTL <= 0 {
			return nil, idempotency.Permanent(fmt.Errorf("pgstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
		}
	}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(reqs[a].Caller, reqs[b].Caller); c != 0 {
			return c
		}
		return strings.Compare(reqs[a].Key, reqs[b].Key)
	})
	b := &pgx.Batch{}
	for _, i := range order {
		req := reqs[i]
		b.Queue(s.q.claim, []byte(req.Caller), []byte(req.Key), []byte(req.Fingerprint), req.Lease.Microseconds(),
			req.TTL.Microseconds(), req.Resume, s.now(), []byte(req.Point))
	}
	claims := make([]idempotency.Claim, len(reqs))
	var raced []int
	br := s.pool.SendBatch(ctx, b)
	for _, i := range order {
		var claimed bool
		rec, err := scanRecord(br.QueryRow(), &claimed)
		if errors.Is(err, pgx.ErrNoRows) {
			raced = append(raced, i)
			continue
		}
		if err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("pgstore: claim batch: %w", classify(err))
		}
		claims[i] = idempotency.Claim{Outcome: outcome(claimed, rec, reqs[i].Fingerprint), Record: rec}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("pgstore: claim batch: %w", classify(err))
	}
	for _, i := range raced {
		c, err := s.Claim(ctx, reqs[i])
		if err != nil {
			return nil, err
		}
		claims[i] = c
	}
	return claims, nil
}

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
	q := &pgx.Batch{}
	for _, c := range pending {
		q.Queue(b.s.q.complete, []byte(c.f.Caller), []byte(c.f.Key), c.f.Attempt, c.response, c.f.Generation, b.s.now())
	}
	var br pgx.BatchResults
	if b.conn != nil {
		q.Queue("COMMIT")
		br = b.conn.SendBatch(ctx, q)
	} else {
		// One implicit transaction: the statements of a pipeline before
		// its sync commit together.
		br = b.s.pool.SendBatch(ctx, q)
	}
	tags := make([]pgconn.CommandTag, len(pending))
	var err error
	for i := range pending {
		if tags[i], err = br.Exec(); err != nil {
			break
		}
	}
	var commit pgconn.CommandTag
	if err == nil && b.conn != nil {
		commit, err = br.Exec()
	}
	err = errors.Join(err, br.Close())
	if err == nil && b.conn != nil && commit.String() == "ROLLBACK" {
		err = fmt.Errorf("%w: %w", idempotency.ErrTxFailed, pgx.ErrTxCommitRollback)
	}
	b.end(ctx, err != nil)
	if err != nil {
		return fail(fmt.Errorf("pgstore: batch commit: %w", classify(err)))
	}
	for i, c := range pending {
		var cerr error
		if tags[i].RowsAffected() == 0 {
			cerr = idempotency.ErrLeaseLost
		}
		results = append(results, idempotency.BatchResult{Fence: c.f, Err: cerr})
	}
	for _, f := range done {
		results = append(results, idempotency.BatchResult{Fence: f})
	}
	return results, nil
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
