package mysqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

var _ idempotency.BatchStore = (*Store)(nil)

// errBatchClosed is returned by the methods of a closed batch.
var errBatchClosed = errors.New("mysqlstore: the batch is closed")

// recordKey is a record's caller and key.
type recordKey struct{ caller, key string }

// ClaimBatch claims every request as Claim does. The records of all are
// read in one statement (without a lock, as Claim reads), and the keys
// that have none are created by one INSERT of many rows (one round trip,
// one commit). A request whose key has a record, whose key came earlier
// in the batch, or whose INSERT met a concurrent claim (a duplicate key:
// the INSERT of many rows then creates none; or a deadlock with one), is
// claimed alone by Claim.
func (s *Store) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	for _, req := range reqs {
		if req.Lease <= 0 || req.TTL <= 0 {
			return nil, retry.Permanent(fmt.Errorf("mysqlstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
		}
	}
	claims := make([]idempotency.Claim, len(reqs))
	first := make(map[recordKey]int, len(reqs))
	var alone, fresh []int
	for i, req := range reqs {
		k := recordKey{req.Caller, req.Key}
		if _, dup := first[k]; dup {
			alone = append(alone, i)
			continue
		}
		first[k] = i
		fresh = append(fresh, i)
	}
	if len(fresh) > 0 {
		now, found, err := s.readMany(ctx, reqs, fresh)
		if err != nil {
			return nil, err
		}
		var create []int
		for _, i := range fresh {
			if found[recordKey{reqs[i].Caller, reqs[i].Key}] {
				alone = append(alone, i)
			} else {
				create = append(create, i)
			}
		}
		made, err := s.createMany(ctx, now, reqs, create, claims)
		if err != nil {
			return nil, err
		}
		if !made {
			alone = append(alone, create...)
		}
	}
	slices.Sort(alone)
	for _, i := range alone {
		c, err := s.Claim(ctx, reqs[i])
		if err != nil {
			return nil, err
		}
		claims[i] = c
	}
	return claims, nil
}

// readMany reads which of the requests idx have a record (live or not),
// and the database clock after the read.
func (s *Store) readMany(ctx context.Context, reqs []idempotency.ClaimRequest, idx []int) (int64, map[recordKey]bool, error) {
	args := make([]any, 0, 1+len(idx))
	args = append(args, s.shiftArg())
	for _, i := range idx {
		args = append(args, recordID(reqs[i].Caller, reqs[i].Key))
	}
	query := s.q.claimReadMany + "(" + strings.TrimSuffix(strings.Repeat("?, ", len(idx)), ", ") + ")"
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, nil, fmt.Errorf("mysqlstore: claim batch: %w", classify(err))
	}
	defer rows.Close()
	var now int64
	found := make(map[recordKey]bool)
	for rows.Next() {
		var caller, key []byte
		if err := rows.Scan(&now, &caller, &key); err != nil {
			return 0, nil, fmt.Errorf("mysqlstore: claim batch: %w", classify(err))
		}
		if caller != nil {
			found[recordKey{string(caller), string(key)}] = true
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("mysqlstore: claim batch: %w", classify(err))
	}
	return now, found, nil
}

// createMany creates the records of the requests idx in one INSERT, with
// leases and expiry from now, and fills their claims; made is false when
// the INSERT met a record a concurrent claim made (and created none).
func (s *Store) createMany(ctx context.Context, now int64, reqs []idempotency.ClaimRequest, idx []int, claims []idempotency.Claim) (bool, error) {
	if len(idx) == 0 {
		return true, nil
	}
	// In the order of their primary key, so that two batches inserting
	// the same keys take their locks in one order.
	idx = slices.Clone(idx)
	slices.SortFunc(idx, func(a, b int) int {
		return bytes.Compare(recordID(reqs[a].Caller, reqs[a].Key), recordID(reqs[b].Caller, reqs[b].Key))
	})
	recs := make([]idempotency.Record, len(idx))
	args := make([]any, 0, 10*len(idx))
	for j, i := range idx {
		req := reqs[i]
		gen, err := s.newGeneration(ctx)
		if err != nil {
			return false, fmt.Errorf("mysqlstore: claim batch: %w", err)
		}
		recs[j] = idempotency.Record{
			Caller: req.Caller, Key: req.Key, Fingerprint: req.Fingerprint,
			State: idempotency.StateInProgress, Attempt: 1, Generation: gen,
			LockedUntil:   fromMicros(now + req.Lease.Microseconds()),
			RecoveryPoint: req.Point,
			Resume:        clone(req.Resume),
			CreatedAt:     fromMicros(now), ExpiresAt: fromMicros(now + req.TTL.Microseconds()),
		}
		args = append(args, recordID(req.Caller, req.Key), []byte(req.Caller), []byte(req.Key), []byte(req.Fingerprint),
			gen, recs[j].LockedUntil.UnixMicro(), req.Point, req.Resume, now, recs[j].ExpiresAt.UnixMicro())
	}
	query := s.q.insertHead + strings.TrimSuffix(strings.Repeat(s.q.insertRow+", ", len(idx)), ", ")
	_, err := s.db.ExecContext(ctx, query, args...)
	if lostRace(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mysqlstore: claim batch: %w", classify(err))
	}
	for j, i := range idx {
		claims[i] = idempotency.Claim{Outcome: idempotency.ClaimCreated, Record: recs[j]}
	}
	return true, nil
}

// BeginBatch opens a batch of completions. Commit stores the outcomes of
// the executions that wrote nothing locally in one fenced UPDATE,
// committed on its own (see completeMany; a record completed twice in the
// batch, by a stale and a live execution, takes one more).
// An execution that writes locally has its own transaction (see TxFrom),
// committed with its outcome at its Complete, as without a batch: a
// transaction shared by many executions could not keep the rule that a
// handler's transaction never commits in part, since InnoDB answers some
// failures (a deadlock) by rolling back the whole transaction, savepoints
// and all.
func (s *Store) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &myBatch{s: s}, nil
}

// myBatch is the Store's idempotency.BatchTx.
type myBatch struct {
	s       *Store
	mu      sync.Mutex
	pending []completion
	done    []idempotency.Fence // completed in their own transactions
	closed  bool
}

// completion is an outcome waiting for the batch's Commit.
type completion struct {
	f        idempotency.Fence
	response []byte
}

// Begin starts the transaction of the execution fenced by f in the batch.
func (b *myBatch) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	return &batchMember{completionTx: completionTx{f: f, tx: &Tx{s: b.s}}, b: b}, nil
}

// Commit stores the pending outcomes whose fence holds, in one fenced
// UPDATE committed on its own (one more for each further completion of a
// record that the batch completes more than once).
func (b *myBatch) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pending, done := b.pending, b.done
	b.pending, b.done = nil, nil
	results := make([]idempotency.BatchResult, 0, len(pending)+len(done))
	for _, f := range done {
		results = append(results, idempotency.BatchResult{Fence: f})
	}
	if len(pending) == 0 {
		return results, nil
	}
	// Each UPDATE commits on its own: when one fails after another
	// committed, the results say which outcomes were stored, and Commit
	// does not fail as a whole.
	stored := make(map[idempotency.Fence]bool, len(pending))
	answered := make(map[idempotency.Fence]bool, len(pending))
	var err error
	for rest := pending; len(rest) > 0; {
		var round []completion
		round, rest = distinctRecords(rest)
		if err = b.completeMany(ctx, round, stored); err != nil {
			break
		}
		for _, c := range round {
			answered[c.f] = true
		}
	}
	for _, c := range pending {
		var cerr error
		switch {
		case stored[c.f]:
		case answered[c.f]:
			cerr = idempotency.ErrLeaseLost
		default:
			cerr = err
		}
		results = append(results, idempotency.BatchResult{Fence: c.f, Err: cerr})
	}
	if len(answered) > 0 {
		return results, nil
	}
	return results, err
}

// distinctRecords splits pending into the first completion of each record
// and the rest, in their order: one UPDATE completes each record once (its
// CASEs on id take the first completion of an id), so two completions of
// one record (an execution that outlived its lease and the one that took
// over) go in UPDATEs one after the other.
func distinctRecords(pending []completion) (round, rest []completion) {
	seen := make(map[recordKey]bool, len(pending))
	for _, c := range pending {
		k := recordKey{c.f.Caller, c.f.Key}
		if seen[k] {
			rest = append(rest, c)
			continue
		}
		seen[k] = true
		round = append(round, c)
	}
	return round, rest
}

// completeMany stores the outcomes of pending (one per record) whose fence
// holds, in one fenced UPDATE committed on its own (one round trip), and
// adds their fences to stored. When it changed fewer records than it was
// given, the records are read to tell which: one completed with its fence
// and with the outcome given was completed by this update, unless an
// earlier completion of the same execution had stored that very outcome
// (a retry of one whose answer was lost), which stored what this one
// would have.
func (b *myBatch) completeMany(ctx context.Context, pending []completion, stored map[idempotency.Fence]bool) error {
	s := b.s
	ids := make([]any, len(pending))
	var responses, fences strings.Builder
	args := make([]any, 0, 8*len(pending)+1)
	for i, c := range pending {
		ids[i] = recordID(c.f.Caller, c.f.Key)
		responses.WriteString(" WHEN ? THEN ?")
		args = append(args, ids[i], nonNil(c.response))
	}
	args = append(args, s.shiftArg())
	args = append(args, ids...)
	for i, c := range pending {
		fences.WriteString(" WHEN ? THEN caller = ? AND `key` = ? AND attempt = ? AND generation = ?")
		args = append(args, ids[i], []byte(c.f.Caller), []byte(c.f.Key), c.f.Attempt, c.f.Generation)
	}
	list := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(pending)), ", ") + ")"
	query := s.q.completeMany[0] + responses.String() + s.q.completeMany[1] + list + s.q.completeMany[2] + fences.String() + " END"
	res, err := s.execAlone(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("mysqlstore: batch commit: %w", classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("mysqlstore: batch commit: %w", err)
	}
	if n == int64(len(pending)) {
		for _, c := range pending {
			stored[c.f] = true
		}
		return nil
	}
	byID := make(map[string]completion, len(pending))
	for i, c := range pending {
		byID[string(ids[i].([]byte))] = c
	}
	rows, err := s.db.QueryContext(ctx, s.q.completeRead+list, ids...)
	if err != nil {
		return fmt.Errorf("mysqlstore: batch commit: %w", classify(err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, caller, key, response   []byte
			attempt, generation, status int64
		)
		if err := rows.Scan(&id, &caller, &key, &attempt, &generation, &status, &response); err != nil {
			return fmt.Errorf("mysqlstore: batch commit: %w", classify(err))
		}
		c, ok := byID[string(id)]
		f := c.f
		if ok && status == 2 && f.Caller == string(caller) && f.Key == string(key) && f.Attempt == attempt && f.Generation == generation &&
			bytes.Equal(response, c.response) {
			stored[f] = true
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysqlstore: batch commit: %w", classify(err))
	}
	return nil
}

// Close ends the batch; outcomes not committed are not stored.
func (b *myBatch) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.pending, b.done = true, nil, nil
	return nil
}

// batchMember is the transaction of one execution in a myBatch: its own,
// for its local writes; when it has none, its outcome goes to the batch.
type batchMember struct {
	completionTx
	b *myBatch
}

// Complete adds the outcome to the batch when the execution wrote nothing
// locally, and otherwise completes it in its own transaction, as
// completionTx does.
func (m *batchMember) Complete(ctx context.Context, response []byte) error {
	t := m.tx
	if t.closed {
		return sql.ErrTxDone
	}
	b := m.b
	if t.tx == nil && t.err() == nil {
		t.end(false)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			return errBatchClosed
		}
		b.pending = append(b.pending, completion{f: m.f, response: clone(response)})
		return nil
	}
	if err := m.completionTx.Complete(ctx, response); err != nil {
		return err
	}
	b.mu.Lock()
	b.done = append(b.done, m.f)
	b.mu.Unlock()
	return nil
}
