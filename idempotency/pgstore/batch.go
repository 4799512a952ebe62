package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// ClaimBatch claims every request as Claim does, all in one statement
// (one round trip, one commit).
//
// Unless a request carries a recovery point (Point: the started mark of a
// broker's last delivery, which the store owns from its claim on), the
// claims commit without waiting for the write-ahead log to reach the disk
// (synchronous_commit off for their transaction): other sessions see them
// at once, as usual, and they become durable with the first write after
// them that waits for the disk (a recovery point, the outcome, whose
// flush takes every earlier record of the log along). A database crash
// before that loses only claims whose executions stored nothing: the
// messages are still the broker's, delivered again, and claimed again,
// as after a crash that kept them an execution would be taken over. The
// generation of a record a batch creates is mixed with a random value of
// the batch, so that the sequence values such a crash hands out again
// never make a new record look like a lost one to the fence of an
// execution that outlived the crash.
//
// A request that a concurrent claim raced
// (the statement changed nothing for it), or whose key came earlier in the
// batch, is claimed again alone afterwards. The keys' rows are locked in
// the order of their caller and key, so two batches claiming the same
// keys take the locks in one order.
func (s *Store) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	for _, req := range reqs {
		if req.Lease <= 0 || req.TTL <= 0 {
			return nil, idempotency.Permanent(fmt.Errorf("pgstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
		}
	}
	first := make(map[recordKey]int, len(reqs))
	var again []int // claimed alone afterwards
	order := make([]int, 0, len(reqs))
	for i, req := range reqs {
		p := recordKey{req.Caller, req.Key}
		if _, dup := first[p]; dup {
			again = append(again, i)
			continue
		}
		first[p] = i
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(reqs[a].Caller, reqs[b].Caller); c != 0 {
			return c
		}
		return strings.Compare(reqs[a].Key, reqs[b].Key)
	})
	n := len(order)
	callers, keys, fps, resumes, points := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	leases, ttls := make([]int64, n), make([]int64, n)
	for j, i := range order {
		req := reqs[i]
		callers[j], keys[j], fps[j] = []byte(req.Caller), []byte(req.Key), []byte(req.Fingerprint)
		leases[j], ttls[j], resumes[j], points[j] = req.Lease.Microseconds(), req.TTL.Microseconds(), req.Resume, []byte(req.Point)
	}
	claims := make([]idempotency.Claim, len(reqs))
	answered := make([]bool, len(reqs))
	durable := false
	for _, req := range reqs {
		durable = durable || req.Point != ""
	}
	err := s.claimAll(ctx, durable, []any{callers, keys, fps, leases, ttls, resumes, points, s.now(), generationMask()}, func(rows pgx.Rows) error {
		for rows.Next() {
			var claimed bool
			rec, err := scanRecord(rows, &claimed)
			if err != nil {
				return err
			}
			i, ok := first[recordKey{rec.Caller, rec.Key}]
			if !ok || answered[i] {
				return errors.New("an answer for a key not asked for once")
			}
			answered[i] = true
			claims[i] = idempotency.Claim{Outcome: outcome(claimed, rec, reqs[i].Fingerprint), Record: rec}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim batch: %w", classify(err))
	}
	for _, i := range order {
		if !answered[i] {
			again = append(again, i)
		}
	}
	slices.Sort(again)
	for _, i := range again {
		c, err := s.Claim(ctx, reqs[i])
		if err != nil {
			return nil, err
		}
		claims[i] = c
	}
	return claims, nil
}

// generationMask is a random value with bit 62 set (and bit 63 clear),
// which the generations of a batch's new records are mixed with.
func generationMask() int64 {
	return int64(rand.Uint64()>>2 | 1<<62)
}

// claimAll runs the batch's claim statement with args and reads its rows
// with read. Unless durable, its transaction commits without waiting for
// the write-ahead log to reach the disk (synchronous_commit off): see
// ClaimBatch.
func (s *Store) claimAll(ctx context.Context, durable bool, args []any, read func(pgx.Rows) error) error {
	if durable {
		rows, err := s.pool.Query(ctx, s.bq.claim, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return read(rows)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	q := &pgx.Batch{}
	q.Queue("BEGIN")
	q.Queue("SET LOCAL synchronous_commit TO off")
	q.Queue(s.bq.claim, args...)
	q.Queue("COMMIT")
	br := conn.SendBatch(ctx, q)
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = read(rows)
			rows.Close()
			err = errors.Join(err, rows.Err())
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	err = errors.Join(err, br.Close())
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
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
	n := len(pending)
	callers, keys, responses := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	attempts, generations := make([]int64, n), make([]int64, n)
	for i, c := range pending {
		callers[i], keys[i], responses[i] = []byte(c.f.Caller), []byte(c.f.Key), c.response
		attempts[i], generations[i] = c.f.Attempt, c.f.Generation
	}
	stored := make(map[recordKey]bool, n)
	var err error
	if b.conn == nil {
		// One statement, committed on its own.
		rows, qerr := b.s.pool.Query(ctx, b.s.bq.complete, callers, keys, attempts, responses, generations, b.s.now())
		err = readStored(rows, qerr, stored)
	} else {
		// The members' savepoints are in the transaction: the update and
		// COMMIT in one round trip.
		q := &pgx.Batch{}
		if n > 0 {
			q.Queue(b.s.bq.complete, callers, keys, attempts, responses, generations, b.s.now())
		}
		q.Queue("COMMIT")
		br := b.conn.SendBatch(ctx, q)
		if n > 0 {
			rows, qerr := br.Query()
			err = readStored(rows, qerr, stored)
		}
		var commit pgconn.CommandTag
		if err == nil {
			commit, err = br.Exec()
		}
		err = errors.Join(err, br.Close())
		if err == nil && commit.String() == "ROLLBACK" {
			err = fmt.Errorf("%w: %w", idempotency.ErrTxFailed, pgx.ErrTxCommitRollback)
		}
		b.end(ctx, err != nil)
	}
	if err != nil {
		return fail(fmt.Errorf("pgstore: batch commit: %w", classify(err)))
	}
	for _, c := range pending {
		var cerr error
		if !stored[recordKey{c.f.Caller, c.f.Key}] {
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

// readStored reads the records the set-based completion stored (rows, or
// the query's error) into stored.
func readStored(rows pgx.Rows, err error, stored map[recordKey]bool) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var caller, key []byte
		if err := rows.Scan(&caller, &key); err != nil {
			return err
		}
		stored[recordKey{string(caller), string(key)}] = true
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
