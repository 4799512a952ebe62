package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The fault matrix on Redis: the store's connections killed by the server
// (CLIENT KILL), workers killed and paused. Redis has no transactions for
// a handler's writes, so the database errors of a transaction do not run.
func TestFaults(t *testing.T) {
	t.Parallel()
	storetest.RunFaults(t, func(t *testing.T) (storetest.Harness, storetest.Faults) {
		name := "redisstore_faults_" + randomHex(12)
		rdb := redis.NewClient(&redis.Options{Addr: addr(), ClientName: name})
		t.Cleanup(func() { _ = rdb.Close() })
		shift := new(redisstore.TimeShift)
		s, err := redisstore.New(rdb, redisstore.WithPrefix(newPrefix(t, rdb)), redisstore.WithTimeShift(shift))
		require.NoError(t, err)
		admin := newClient(t)
		return storetest.Harness{Store: s, Advance: shift.Advance},
			storetest.Faults{Drop: func(_ context.Context, t *testing.T) { dropClients(t, admin, name) }}
	})
}

// dropClients kills, with CLIENT KILL, every connection named name, and
// waits until the server has closed them.
func dropClients(t *testing.T, admin *redis.Client, name string) {
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Errorf("CLIENT LIST: %v", err)
			return
		}
		ids := clientIDs(list, name)
		if len(ids) == 0 {
			return
		}
		for _, id := range ids {
			// A client that is gone already answers an error: no matter.
			_ = admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err()
		}
		if time.Now().After(deadline) {
			t.Errorf("clients %v still there 10s after CLIENT KILL", ids)
			return
		}
		<-tick.C
	}
}

// clientIDs returns the ids of the clients named name in a CLIENT LIST.
func clientIDs(list, name string) []string {
	var ids []string
	for _, line := range strings.Split(list, "\n") {
		var id string
		named := false
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch {
			case k == "id":
				id = v
			case k == "name" && v == name:
				named = true
			}
		}
		if named && id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
