package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// defaultStalledLimit bounds a TakeOverStalled call given no limit.
const defaultStalledLimit = 1000

// TakeOverStalled takes over up to limit stalled executions (those that
// began, whose lease ran out, not parked; limit <= 0: 1,000), oldest lease
// first, each atomically in its shard's script. It reads the candidates of
// every shard (one pipelined round trip), keeps the limit oldest, and takes
// them over (a second one): a record another instance took over in between
// holds a live lease again and is skipped, never waited for, so instances
// running it at once share the work and no record goes to two of them.
// Each record comes back with its Attempt incremented and a lease of lease
// from the Redis clock.
func (s *Store) TakeOverStalled(ctx context.Context, limit int, lease time.Duration) ([]idempotency.Record, error) {
	if lease <= 0 {
		return nil, idempotency.Permanent(fmt.Errorf("redisstore: take over stalled: lease %v must be positive", lease))
	}
	if limit <= 0 {
		limit = defaultStalledLimit
	}
	cands, err := s.dueIn(ctx, func(k shardKeys) string { return k.stalled }, limit)
	if err != nil {
		return nil, fmt.Errorf("redisstore: take over stalled: %w", err)
	}
	slices.SortStableFunc(cands, func(a, b due) int {
		switch {
		case a.score < b.score:
			return -1
		case a.score > b.score:
			return 1
		}
		return 0
	})
	cands = cands[:min(len(cands), limit)]
	calls := s.byShard(cands, func(k shardKeys, ids []string) *call {
		keys := []string{k.stalled, k.exp, k.parked}
		args := []any{s.shiftArg(), micros(lease)}
		for _, id := range ids {
			keys = append(keys, k.record(id))
			args = append(args, id)
		}
		return &call{script: takeOverLua, keys: keys, args: args}
	})
	if err := s.runAll(ctx, calls); err != nil {
		return nil, fmt.Errorf("redisstore: take over stalled: %w", err)
	}
	var taken []idempotency.Record
	for _, c := range calls {
		v, err := c.cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: take over stalled: %w", classify(err))
		}
		recs, err := parseRecords(v)
		if err != nil {
			return nil, fmt.Errorf("redisstore: take over stalled: %w", err)
		}
		taken = append(taken, recs...)
	}
	return taken, nil
}

// byShard makes one call per shard that has members among ds, with their ids
// in the order of ds.
func (s *Store) byShard(ds []due, mk func(k shardKeys, ids []string) *call) []*call {
	ids := make(map[int][]string)
	var order []int
	for _, d := range ds {
		if _, ok := ids[d.shard]; !ok {
			order = append(order, d.shard)
		}
		ids[d.shard] = append(ids[d.shard], d.id)
	}
	calls := make([]*call, 0, len(order))
	for _, shard := range order {
		calls = append(calls, mk(s.shards[shard], ids[shard]))
	}
	return calls
}

// parseScore reads a sorted-set score as the scripts return it.
func parseScore(v any) (float64, error) {
	switch x := v.(type) {
	case string:
		return strconv.ParseFloat(x, 64)
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	}
	return 0, fmt.Errorf("a score of type %T", v)
}
