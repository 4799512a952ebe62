package redisstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/redis/go-redis/v9"
)

// ListParked returns up to limit live parked records (limit <= 0:
// 100, the default page) after (afterCaller, afterKey), by caller
// then key, byte-wise. It reads only the parked sets (ordered by caller and
// key in each shard) and the records they name, merging the shards; it
// changes nothing.
func (s *Store) ListParked(ctx context.Context, afterCaller, afterKey string, limit int) ([]idempotency.Record, error) {
	if limit <= 0 {
		limit = idempotency.ListQuery{}.PageSize() // the default page: 100
	}
	type shardCursor struct {
		after string // exclusive lower bound of the next read
		done  bool
	}
	cursors := make([]shardCursor, len(s.shards))
	for i := range cursors {
		// Past every member of (afterCaller, afterKey): its id is hex.
		cursors[i].after = orderedPrefix(afterCaller, afterKey) + "\xff"
	}
	type found struct {
		member string
		rec    idempotency.Record
	}
	var pool []found
	for {
		// Read the next members of every shard not read to its end.
		reads := make(map[int]*redis.StringSliceCmd)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range cursors {
				if !c.done {
					reads[i] = p.ZRangeByLex(ctx, s.shards[i].parked, &redis.ZRangeBy{Min: "(" + c.after, Max: "+", Count: int64(limit)})
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redisstore: list parked: %w", classify(err))
		}
		var calls []*call
		for i, cmd := range reads {
			members := cmd.Val()
			if len(members) < limit {
				cursors[i].done = true
			}
			if len(members) == 0 {
				continue
			}
			cursors[i].after = members[len(members)-1]
			keys := make([]string, 0, len(members))
			for _, m := range members {
				if len(m) < idLen {
					return nil, fmt.Errorf("redisstore: list parked: a malformed member of %s", s.shards[i].parked)
				}
				keys = append(keys, s.shards[i].record(m[len(m)-idLen:]))
			}
			calls = append(calls, &call{script: parkedLua, keys: keys, args: []any{s.shiftArg()}})
		}
		if err := s.runAll(ctx, calls); err != nil {
			return nil, fmt.Errorf("redisstore: list parked: %w", err)
		}
		for _, c := range calls {
			v, err := c.cmd.Slice()
			if err != nil {
				return nil, fmt.Errorf("redisstore: list parked: %w", classify(err))
			}
			recs, err := parseRecords(v)
			if err != nil {
				return nil, fmt.Errorf("redisstore: list parked: %w", err)
			}
			for _, r := range recs {
				id, _ := s.at(r.Caller, r.Key)
				pool = append(pool, found{member: parkedMember(r.Caller, r.Key, id), rec: r})
			}
		}
		// Records up to the lowest cursor of a shard not read to its end
		// are in their final order: no shard holds one before them unread.
		bound, open := "", false
		for _, c := range cursors {
			if !c.done && (!open || c.after < bound) {
				bound, open = c.after, true
			}
		}
		slices.SortFunc(pool, func(a, b found) int {
			switch {
			case a.member < b.member:
				return -1
			case a.member > b.member:
				return 1
			}
			return 0
		})
		final := len(pool)
		if open {
			final, _ = slices.BinarySearchFunc(pool, bound, func(f found, b string) int {
				switch {
				case f.member <= b:
					return -1
				}
				return 1
			})
		}
		if final >= limit || !open {
			out := make([]idempotency.Record, 0, min(final, limit))
			for _, f := range pool[:min(final, limit)] {
				out = append(out, f.rec)
			}
			return out, nil
		}
	}
}
