package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// batchItem is one item of a batch script: the shard of its record and the
// KEYS and ARGV (less the shift) of the per-key script.
type batchItem struct {
	shard int
	keys  []string
	args  []any
}

// runBatch runs script (a batch script of batchscripts.go) over items and
// returns each item's reply, or its error, in the order of items. Items
// that may share a script call go in one: all of them on a single server
// (a *redis.Client, Sentinel's included), the items of one shard on a
// cluster or ring, where a script may only touch the keys of one slot (each
// shard is one hash tag). The calls go in one pipeline.
func (s *Store) runBatch(ctx context.Context, script *redis.Script, items []batchItem) ([]any, []error) {
	groups := s.groupItems(items)
	calls := make([]*call, len(groups))
	for g, members := range groups {
		c := &call{script: script, args: []any{s.shiftArg()}}
		for _, i := range members {
			c.keys = append(c.keys, items[i].keys...)
			c.args = append(c.args, items[i].args...)
		}
		calls[g] = c
	}
	_ = s.runAll(ctx, calls)
	replies := make([]any, len(items))
	errs := make([]error, len(items))
	for g, members := range groups {
		res, err := calls[g].cmd.Slice()
		if err == nil && len(res) != len(members) {
			err = fmt.Errorf("%d replies for %d items", len(res), len(members))
		}
		for j, i := range members {
			if err != nil {
				errs[i] = classify(err)
				continue
			}
			replies[i], errs[i] = res[j], itemError(res[j])
		}
	}
	return replies, errs
}

// groupItems returns the indexes of items by script call, each group in the
// order of items.
func (s *Store) groupItems(items []batchItem) [][]int {
	if len(items) == 0 {
		return nil
	}
	if _, oneServer := s.rdb.(*redis.Client); oneServer {
		all := make([]int, len(items))
		for i := range items {
			all[i] = i
		}
		return [][]int{all}
	}
	var groups [][]int
	at := make(map[int]int)
	for i, it := range items {
		g, ok := at[it.shard]
		if !ok {
			g = len(groups)
			at[it.shard] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// itemError is the error of an item the batch script could not run, or nil.
func itemError(reply any) error {
	v, ok := reply.([]any)
	if !ok || len(v) != 2 || v[0] != "e" {
		return nil
	}
	msg, _ := v[1].(string)
	return classify(itemReplyError(msg))
}

// itemReplyError is the error reply of one item of a batch script, a
// redis.Error as the reply of a script of its own would be.
type itemReplyError string

func (e itemReplyError) Error() string { return string(e) }

// RedisError marks the error as a reply of the server.
func (itemReplyError) RedisError() {}
