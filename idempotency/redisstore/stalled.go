package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

// defaultStalledLimit bounds a TakeOverStalled call given no limit.
const defaultStalledLimit = 1000

// defaultStalledScan is how many members of a shard's stalled set one call
// of dueOfScript reads at most, so that a script never blocks Redis for
// long.
const defaultStalledScan = 1000

// TakeOverStalled takes over up to limit stalled executions (those that
// began, whose lease ran out, not parked; only caller's unless caller is
// ""; limit <= 0: 1,000), oldest lease first, each atomically in its
// shard's script. It reads the candidates of every shard (one pipelined
// round trip), keeps the limit oldest, and takes them over (a second one):
// a record another instance took over in between holds a live lease again
// and is skipped, never waited for, so instances running it at once share
// the work and no record goes to two of them. Each record comes back with
// its Attempt incremented and a lease of lease from the Redis clock.
//
// The stalled sets do not know the caller of their members: for one
// caller, the candidates' script reads each member's caller, and reads on
// past the stalled executions of other callers, 1,000 members of a shard
// per round trip, until it found limit of caller's or none is left that
// could be older than those found. A record of another caller is never
// taken over.
func (s *Store) TakeOverStalled(ctx context.Context, caller string, limit int, lease time.Duration) ([]idempotency.Record, error) {
	if lease <= 0 {
		return nil, retry.Permanent(fmt.Errorf("redisstore: take over stalled: lease %v must be positive", lease))
	}
	if limit <= 0 {
		limit = defaultStalledLimit
	}
	var (
		cands []due
		err   error
	)
	if caller == "" {
		cands, err = s.dueIn(ctx, func(k shardKeys) string { return k.stalled }, limit)
	} else {
		cands, err = s.dueOf(ctx, caller, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: take over stalled: %w", err)
	}
	sortDue(cands)
	cands = cands[:min(len(cands), limit)]
	calls := s.byShard(cands, func(k shardKeys, ids []string) *call {
		keys := []string{k.stalled, k.exp, k.parked}
		args := []any{s.shiftArg(), micros(lease), caller}
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

// sortDue sorts ds by score, lowest first, keeping the order of equal ones.
func sortDue(ds []due) {
	slices.SortStableFunc(ds, func(a, b due) int { return cmp.Compare(a.score, b.score) })
}

// dueOf lists, in every shard, up to limit stalled records of caller whose
// lease ran out, lowest score first in each shard. Each round trip reads on
// in the shards not done yet, s.stalledScan members each: a shard is done
// once it found limit, read every member due, or read past the score of
// the limit oldest found in all shards (what it would find next could not
// be among them). A member read twice (the set changed between two round
// trips) is listed once; one missed that way is found by a later call.
func (s *Store) dueOf(ctx context.Context, caller string, limit int) ([]due, error) {
	type scan struct {
		shard int
		rank  int64 // where to go on from
		found int
		last  float64 // the score of the last member read
	}
	var (
		open []*scan
		all  []due
		seen = make(map[string]bool)
	)
	for i := range s.shards {
		open = append(open, &scan{shard: i})
	}
	for len(open) > 0 {
		calls := make([]*call, len(open))
		for i, sc := range open {
			k := s.shards[sc.shard]
			calls[i] = &call{script: dueOfLua, keys: []string{k.stalled},
				args: []any{s.shiftArg(), limit - sc.found, caller, k.record(""), sc.rank, s.stalledScan}}
		}
		if err := s.runAll(ctx, calls); err != nil {
			return nil, err
		}
		var next []*scan
		for i, c := range calls {
			sc := open[i]
			v, err := c.cmd.Slice()
			if err != nil {
				return nil, err
			}
			if len(v) < 2 {
				return nil, fmt.Errorf("the stalled records of a shard came as %d values", len(v))
			}
			rank, err := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("a rank: %w", err)
			}
			if last := fmt.Sprint(v[1]); last != "" {
				if sc.last, err = parseScore(last); err != nil {
					return nil, err
				}
			}
			for j := 2; j+1 < len(v); j += 2 {
				id, _ := v[j].(string)
				score, err := parseScore(v[j+1])
				if err != nil {
					return nil, err
				}
				sc.found++
				if !seen[id] {
					seen[id] = true
					all = append(all, due{id: id, score: score, shard: sc.shard})
				}
			}
			if rank >= 0 && sc.found < limit {
				sc.rank = rank
				next = append(next, sc)
			}
		}
		open = next
		if len(all) >= limit && len(open) > 0 {
			sortDue(all)
			all = all[:limit]
			bound := all[limit-1].score
			open = slices.DeleteFunc(open, func(sc *scan) bool { return sc.last >= bound })
		}
	}
	return all, nil
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
