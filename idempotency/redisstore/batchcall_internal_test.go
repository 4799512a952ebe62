package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// A batch is one script call on a single server; on a cluster or a ring,
// where a script may only touch the keys of one slot, one per shard, each
// in the order the items came.
func TestBatchGroups(t *testing.T) {
	items := []batchItem{{shard: 3}, {shard: 1}, {shard: 3}, {shard: 2}, {shard: 1}}
	one := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:0"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:0"}})
	t.Cleanup(func() { _ = one.Close(); _ = cluster.Close(); _ = ring.Close() })
	byShard := [][]int{{0, 2}, {1, 4}, {3}}
	for name, c := range map[string]struct {
		rdb  redis.UniversalClient
		want [][]int
	}{
		"one server": {one, [][]int{{0, 1, 2, 3, 4}}},
		"cluster":    {cluster, byShard},
		"ring":       {ring, byShard},
	} {
		s := &Store{rdb: c.rdb}
		assert.Equal(t, c.want, s.groupItems(items), name)
		assert.Empty(t, s.groupItems(nil), name)
	}
}
