package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// startCluster starts a Redis Cluster of one node, holding every slot, on
// a port of its own. A script there may only touch keys of one slot, as on
// a cluster of many nodes (a script that does not fails with CROSSSLOT).
func startCluster(t *testing.T) string {
	t.Helper()
	srv := startRedisServerWith(t, "--appendonly", "no", "--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf")
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr})
	defer rdb.Close()
	slots := make([]int, 16384)
	for i := range slots {
		slots[i] = i
	}
	require.NoError(t, rdb.ClusterAddSlots(ctx, slots...).Err())
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return srv.addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(srv.dir, "redis.log"))
			t.Fatalf("the cluster on %s was not ok within 30s (%v):\n%s\n%s", srv.addr, err, info, log)
		}
		<-tick.C
	}
}

// clusterPrefix is a fresh prefix on a cluster of the test's own: its keys
// go with the server.
func clusterPrefix() string { return "redisstore_test_" + randomHex(12) }

// The conformance suite, the batch cases included, on a Redis Cluster
// through a ClusterClient: every script keeps to the keys of one shard.
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	addr := startCluster(t)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
		t.Cleanup(func() { _ = rdb.Close() })
		shift := new(redisstore.TimeShift)
		s, err := redisstore.New(rdb, redisstore.WithPrefix(clusterPrefix()), redisstore.WithTimeShift(shift))
		require.NoError(t, err)
		return storetest.Harness{Store: s, Advance: shift.Advance}
	})
}

// A batch over every shard on a cluster: one script per shard, each
// claim and outcome stored.
func TestBatchOnCluster(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{startCluster(t)}})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstore.New(rdb, redisstore.WithPrefix(clusterPrefix()))
	require.NoError(t, err)
	ctx := context.Background()
	reqs := make([]idempotency.ClaimRequest, 100)
	for i := range reqs {
		reqs[i] = claimReq("k" + strconv.Itoa(i))
	}
	claims, err := s.ClaimBatch(ctx, reqs)
	require.NoError(t, err)
	tx, err := s.BeginBatch(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Close(ctx) }()
	for i, c := range claims {
		require.Equal(t, idempotency.ClaimCreated, c.Outcome, "claim %d", i)
		m, err := tx.Begin(ctx, c.Record.Fence())
		require.NoError(t, err)
		require.NoError(t, m.Complete(ctx, []byte(fmt.Sprint("done ", i))))
	}
	results, err := tx.Commit(ctx)
	require.NoError(t, err)
	for i, r := range results {
		require.NoError(t, r.Err, "outcome %d", i)
	}
	again, err := s.ClaimBatch(ctx, reqs)
	require.NoError(t, err)
	for i, c := range again {
		require.Equal(t, idempotency.ClaimCompleted, c.Outcome, "replay %d", i)
		require.Equal(t, fmt.Sprint("done ", i), string(c.Record.Response), "replay %d", i)
	}
}
