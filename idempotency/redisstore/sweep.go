package redisstore

import (
	"context"
	"fmt"
	"slices"
)

// sweepBatch is how many expired records of a shard DeleteExpired reads at
// a time when given no limit.
const sweepBatch = 1000

// DeleteExpired removes up to limit expired records (limit <= 0: all of them)
// and returns how many it removed: those whose expiry passed first, each
// with its index entries, re-checked in its shard's script. Every instance
// may sweep at once; a record removed by another is not counted twice.
//
// Redis also drops a record's hash by itself a day after it expired, should
// no sweeper run; the index entries stay until a sweep.
func (s *Store) DeleteExpired(ctx context.Context, limit int) (int, error) {
	total := 0
	for {
		batch := limit
		if limit <= 0 {
			batch = sweepBatch
		}
		expired, err := s.dueIn(ctx, func(k shardKeys) string { return k.exp }, batch)
		if err != nil {
			return total, fmt.Errorf("redisstore: delete expired: %w", err)
		}
		if len(expired) == 0 {
			return total, nil
		}
		if limit > 0 {
			slices.SortStableFunc(expired, func(a, b due) int {
				switch {
				case a.score < b.score:
					return -1
				case a.score > b.score:
					return 1
				}
				return 0
			})
			expired = expired[:min(len(expired), limit)]
		}
		calls := s.byShard(expired, func(k shardKeys, ids []string) *call {
			keys := []string{k.exp, k.stalled, k.parked}
			args := []any{s.shiftArg()}
			for _, id := range ids {
				keys = append(keys, k.record(id))
				args = append(args, id)
			}
			return &call{script: deleteLua, keys: keys, args: args}
		})
		if err := s.runAll(ctx, calls); err != nil {
			return total, fmt.Errorf("redisstore: delete expired: %w", err)
		}
		deleted := 0
		for _, c := range calls {
			n, err := c.cmd.Int()
			if err != nil {
				return total, fmt.Errorf("redisstore: delete expired: %w", classify(err))
			}
			deleted += n
		}
		total += deleted
		if limit > 0 || deleted == 0 {
			return total, nil
		}
	}
}
