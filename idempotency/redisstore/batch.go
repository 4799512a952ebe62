package redisstore

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// call is one script call of a batch.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// runAll runs calls in one pipeline (one round trip per node), by their
// SHA-1; the calls that find the script missing (after a restart of the
// server) run again with the script's source. It returns the first error of
// a call (classified), if any.
func (s *Store) runAll(ctx context.Context, calls []*call) error {
	if len(calls) == 0 {
		return nil
	}
	s.pipeline(ctx, calls, func(p redis.Pipeliner, c *call) *redis.Cmd {
		return c.script.EvalSha(ctx, p, c.keys, c.args...)
	})
	var missing []*call
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			missing = append(missing, c)
		}
	}
	s.pipeline(ctx, missing, func(p redis.Pipeliner, c *call) *redis.Cmd {
		return c.script.Eval(ctx, p, c.keys, c.args...)
	})
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return classify(err)
		}
	}
	return nil
}

// pipeline sends the commands send makes of calls in one pipeline; each
// call's result or error is in its cmd.
func (s *Store) pipeline(ctx context.Context, calls []*call, send func(redis.Pipeliner, *call) *redis.Cmd) {
	if len(calls) == 0 {
		return
	}
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range calls {
			c.cmd = send(p, c)
		}
		return nil
	})
}

// due is a member of a sorted set whose score is not after now.
type due struct {
	id    string
	score float64
	shard int
}

// dueIn lists, in every shard, up to limit members of the sorted set that
// set names whose score is not after now, lowest first in each shard.
func (s *Store) dueIn(ctx context.Context, set func(shardKeys) string, limit int) ([]due, error) {
	calls := make([]*call, len(s.shards))
	for i, k := range s.shards {
		calls[i] = &call{script: dueLua, keys: []string{set(k)}, args: []any{s.shiftArg(), limit}}
	}
	if err := s.runAll(ctx, calls); err != nil {
		return nil, err
	}
	var all []due
	for shard, c := range calls {
		pairs, err := c.cmd.Slice()
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			id, _ := pairs[i].(string)
			score, err := parseScore(pairs[i+1])
			if err != nil {
				return nil, err
			}
			all = append(all, due{id: id, score: score, shard: shard})
		}
	}
	return all, nil
}
