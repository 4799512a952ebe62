package redisstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordFields are the fields of a record hash every version reads, in the
// order the scripts list them (see scripts.go).
var recordFields = []string{"c", "k", "fp", "st", "at", "g", "lu", "pt", "dt", "rs", "rm", "pk", "ca", "ex"}

// olderRead reads the record hash at name as every earlier version does:
// all its fields by name, a missing one as empty.
func olderRead(t *testing.T, s *redisstore.Store, name string) map[string]string {
	t.Helper()
	vals, err := s.Client().HMGet(context.Background(), name, recordFields...).Result()
	require.NoError(t, err)
	out := make(map[string]string, len(vals))
	for i, v := range vals {
		str, _ := v.(string)
		out[recordFields[i]] = str
	}
	return out
}

// wantFields is how rec reads as a hash.
func wantFields(rec idempotency.Record) map[string]string {
	us := func(n int64) string { return strconv.FormatInt(n, 10) }
	rs := ""
	if rec.State == idempotency.StateCompleted {
		rs = string(rec.Response)
	}
	return map[string]string{
		"c": rec.Caller, "k": rec.Key, "fp": rec.Fingerprint, "st": us(int64(rec.State)),
		"at": us(rec.Attempt), "g": us(rec.Generation), "lu": us(rec.LockedUntil.UnixMicro()),
		"pt": rec.RecoveryPoint, "dt": string(rec.RecoveryData), "rs": rs, "rm": string(rec.Resume),
		"pk": rec.Parked, "ca": us(rec.CreatedAt.UnixMicro()), "ex": us(rec.ExpiresAt.UnixMicro()),
	}
}

// A new record's hash leaves out its empty fields, and a completion writes
// no empty response: an older version, which reads a missing field as
// empty, reads the record the store returned, during a rolling upgrade
// and after a rollback.
func TestOlderVersionsReadNewRecords(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	for _, req := range []idempotency.ClaimRequest{
		claimReq("plain"),
		{Caller: "alice", Key: "begun", Fingerprint: "fp", Lease: 60e9, TTL: 3600e9, Point: "started", Resume: []byte("r")},
	} {
		rec := mustClaim(t, s, req, idempotency.ClaimCreated)
		name := redisstore.RecordKey(s, req.Caller, req.Key)
		assert.Equal(t, wantFields(rec), olderRead(t, s, name), req.Key)
		if req.Point == "" {
			n, err := s.Client().HLen(ctx, name).Result()
			require.NoError(t, err)
			assert.EqualValues(t, 9, n, "%s: the empty fields are not written", req.Key)
		}
		require.NoError(t, s.Complete(ctx, rec.Fence(), nil))
		got, err := s.Get(ctx, req.Caller, req.Key)
		require.NoError(t, err)
		assert.Equal(t, wantFields(got), olderRead(t, s, name), req.Key)
		assert.Equal(t, "2", olderRead(t, s, name)["st"])
	}
}

// A record hash with every field, the empty ones included, as versions
// before this one wrote it, is read, claimed and completed as one without.
func TestReadsRecordsWithEveryField(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	rec := mustClaim(t, s, claimReq("old"), idempotency.ClaimCreated)
	name := redisstore.RecordKey(s, "alice", "old")
	all := wantFields(rec)
	var args []any
	for _, f := range recordFields {
		args = append(args, f, all[f])
	}
	require.NoError(t, s.Client().HSet(ctx, name, args...).Err())
	n, err := s.Client().HLen(ctx, name).Result()
	require.NoError(t, err)
	require.EqualValues(t, len(recordFields), n)

	again := mustClaim(t, s, claimReq("old"), idempotency.ClaimInProgress)
	assert.Equal(t, rec, again)
	require.NoError(t, s.Complete(ctx, rec.Fence(), []byte("done")))
	got, err := s.Get(ctx, "alice", "old")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, got.State)
	assert.Equal(t, []byte("done"), got.Response)
	assert.Nil(t, got.Resume)
	assert.Equal(t, wantFields(got), olderRead(t, s, name))
	replay := mustClaim(t, s, claimReq("old"), idempotency.ClaimCompleted)
	assert.Equal(t, got, replay)
}
