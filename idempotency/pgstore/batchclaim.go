package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
)

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
			return nil, retry.Permanent(fmt.Errorf("pgstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
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
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	begin := []string{"BEGIN", "SET LOCAL synchronous_commit TO off"}
	if durable {
		begin = begin[:1]
	}
	return queryAndCommit(ctx, conn, begin, s.bq.claim, args, read)
}
