package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/redis/go-redis/v9"
)

// Store is an idempotency.Store backed by Redis through go-redis v9: a
// single server, a Sentinel-managed primary, or a Redis Cluster. It is safe
// for concurrent use by many goroutines and many processes sharing one
// Redis: every operation on a record is one Lua script (one round trip),
// every write after a claim is fenced by the record's attempt and
// generation, and all times come from the Redis clock (TIME).
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	shards []shardKeys
	shift  *TimeShift
	// stalledScan is how many members of a shard's stalled set one call
	// of dueOfScript reads at most (defaultStalledScan; tests lower it).
	stalledScan int
}

var _ idempotency.Store = (*Store)(nil)

// New returns a Store on rdb. The client stays the caller's: close it after
// the last use of the Store. Nothing needs creating beforehand.
func New(rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("redisstore: nil client")
	}
	c := config{prefix: DefaultPrefix, shards: DefaultShards}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	switch {
	case c.prefix == "":
		return nil, errors.New("redisstore: empty prefix")
	case strings.ContainsAny(c.prefix, "{}"):
		return nil, fmt.Errorf("redisstore: prefix %q contains a brace", c.prefix)
	case c.shards < 1 || c.shards > MaxShards:
		return nil, fmt.Errorf("redisstore: %d shards; want 1 to %d", c.shards, MaxShards)
	}
	s := &Store{rdb: rdb, prefix: c.prefix, shift: c.shift, stalledScan: defaultStalledScan}
	for i := range c.shards {
		s.shards = append(s.shards, newShardKeys(c.prefix, i))
	}
	return s, nil
}

// Client returns the client the store uses.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// shiftArg is the first argument of every script: the test time shift.
func (s *Store) shiftArg() string { return strconv.FormatInt(s.shift.offsetMicros(), 10) }

// at locates the record of (caller, key): its id and its shard's keys.
func (s *Store) at(caller, key string) (string, shardKeys) {
	id, shard := recordID(caller, key, len(s.shards))
	return id, s.shards[shard]
}

// Claim atomically creates the record (Attempt 1, a new Generation,
// recovery point req.Point), replaces an expired one (likewise), takes over
// a stale in-progress record with the same fingerprint (Attempt+1,
// Generation and recovery point kept, or req.Point if it has none),
// or reports the live record: one script, one round trip, with lease and
// expiry computed from the Redis clock.
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	if req.Lease <= 0 || req.TTL <= 0 {
		return idempotency.Claim{}, retry.Permanent(fmt.Errorf("redisstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
	}
	id, k := s.at(req.Caller, req.Key)
	hasResume := "0"
	if req.Resume != nil {
		hasResume = "1"
	}
	res, err := claimLua.Run(ctx, s.rdb, []string{k.record(id), k.exp, k.stalled, k.parked, k.gen},
		s.shiftArg(), req.Caller, req.Key, id, req.Fingerprint, micros(req.Lease), micros(req.TTL), hasResume, req.Resume, req.Point).Slice()
	return parseClaim(req, res, err)
}

// parseClaim reads the reply of the claim script to req.
func parseClaim(req idempotency.ClaimRequest, res []any, err error) (idempotency.Claim, error) {
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", classify(err))
	}
	if len(res) == 3 && res[0] == "n" {
		rec, err := createdRecord(req, res[1], res[2])
		if err != nil {
			return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
		}
		return idempotency.Claim{Outcome: idempotency.ClaimCreated, Record: rec}, nil
	}
	if len(res) != 1+recordFields {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %d values in the reply", len(res))
	}
	rec, err := parseRecord(res[1:])
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: %w", err)
	}
	var out idempotency.ClaimOutcome
	switch res[0] {
	case "t":
		out = idempotency.ClaimTakenOver
	case "p":
		out = idempotency.ClaimInProgress
	case "c":
		out = idempotency.ClaimCompleted
	case "m":
		out = idempotency.ClaimMismatch
	default:
		return idempotency.Claim{}, fmt.Errorf("redisstore: claim: outcome %q", res[0])
	}
	return idempotency.Claim{Outcome: out, Record: rec}, nil
}

// createdRecord is the record the claim script created for req, given the
// generation and the time of creation (microseconds) it replied: the rest
// is the request's, as the script wrote it.
func createdRecord(req idempotency.ClaimRequest, gen, now any) (idempotency.Record, error) {
	g, err := parseInt(gen)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("a malformed generation: %w", err)
	}
	at, err := parseInt(now)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("a malformed creation time: %w", err)
	}
	return idempotency.Record{
		Caller: req.Caller, Key: req.Key, Fingerprint: req.Fingerprint,
		State: idempotency.StateInProgress, Attempt: 1, Generation: g,
		LockedUntil:   time.UnixMicro(at + req.Lease.Microseconds()),
		RecoveryPoint: req.Point,
		Resume:        bytesOrNil(string(req.Resume)),
		CreatedAt:     time.UnixMicro(at),
		ExpiresAt:     time.UnixMicro(at + req.TTL.Microseconds()),
	}, nil
}

// parseInt reads an integer a script replied as a string.
func parseInt(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("a reply of %T", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

// Get returns the live record for (caller, key), or idempotency.ErrNotFound.
func (s *Store) Get(ctx context.Context, caller, key string) (idempotency.Record, error) {
	id, k := s.at(caller, key)
	res, err := getLua.Run(ctx, s.rdb, []string{k.record(id)}, s.shiftArg(), caller, key).Slice()
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: get: %w", classify(err))
	}
	if len(res) == 0 {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	if len(res) != 1+recordFields {
		return idempotency.Record{}, fmt.Errorf("redisstore: get: %d values in the reply", len(res))
	}
	rec, err := parseRecord(res[1:])
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: get: %w", err)
	}
	return rec, nil
}

// SaveRecoveryPoint stores point and data and extends the lease by lease,
// conditional on f.
func (s *Store) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	return s.fenced(ctx, "save recovery point", saveLua, f, point, data, micros(lease))
}

// Complete stores response and marks the record completed, conditional on f.
func (s *Store) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	return s.fenced(ctx, "complete", completeLua, f, response)
}

// Release deletes the in-progress record owned by f, freeing the key.
func (s *Store) Release(ctx context.Context, f idempotency.Fence) error {
	return s.fenced(ctx, "release", releaseLua, f)
}

// ReleaseUnstarted deletes the in-progress record owned by f if it has no
// recovery point; one that got one (from a claim made while f held the
// lease) is kept, its lease ended, for TakeOverStalled.
func (s *Store) ReleaseUnstarted(ctx context.Context, f idempotency.Fence) error {
	return s.fenced(ctx, "release", releaseUnstartedLua, f)
}

// Park marks the record f owns as given up with reason and ends its lease,
// conditional on f.
func (s *Store) Park(ctx context.Context, f idempotency.Fence, reason string) error {
	if reason == "" {
		reason = "parked"
	}
	id, _ := s.at(f.Caller, f.Key)
	return s.fenced(ctx, "park", parkLua, f, reason, parkedMember(f.Caller, f.Key, id))
}

// fenced runs a fenced write: zero means the fence no longer holds.
func (s *Store) fenced(ctx context.Context, op string, script *redis.Script, f idempotency.Fence, args ...any) error {
	id, k := s.at(f.Caller, f.Key)
	argv := append([]any{s.shiftArg(), f.Caller, f.Key, id,
		strconv.FormatInt(f.Attempt, 10), strconv.FormatInt(f.Generation, 10)}, args...)
	n, err := script.Run(ctx, s.rdb, []string{k.record(id), k.exp, k.stalled, k.parked}, argv...).Int()
	if err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, classify(err))
	}
	if n == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// micros is d in microseconds, as the scripts take durations.
func micros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// parseRecord reads the fields of a record, in the order of the scripts' F.
func parseRecord(v []any) (idempotency.Record, error) {
	if len(v) != recordFields {
		return idempotency.Record{}, fmt.Errorf("%d fields in a record", len(v))
	}
	str := make([]string, len(v))
	for i, x := range v {
		s, ok := x.(string)
		if !ok {
			return idempotency.Record{}, fmt.Errorf("field %d is %T", i, x)
		}
		str[i] = s
	}
	var (
		r    idempotency.Record
		errs []error
	)
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs = append(errs, err)
		}
		return n
	}
	r.Caller, r.Key, r.Fingerprint = str[0], str[1], str[2]
	r.State = idempotency.State(num(str[3]))
	r.Attempt, r.Generation = num(str[4]), num(str[5])
	r.LockedUntil = time.UnixMicro(num(str[6]))
	r.RecoveryPoint = str[7]
	r.RecoveryData = bytesOrNil(str[8])
	if r.State == idempotency.StateCompleted {
		r.Response = []byte(str[9])
	}
	r.Resume = bytesOrNil(str[10])
	r.Parked = str[11]
	r.CreatedAt, r.ExpiresAt = time.UnixMicro(num(str[12])), time.UnixMicro(num(str[13]))
	if err := errors.Join(errs...); err != nil {
		return idempotency.Record{}, fmt.Errorf("a malformed record: %w", err)
	}
	return r, nil
}

func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// parseRecords reads records one after another.
func parseRecords(v []any) ([]idempotency.Record, error) {
	if len(v)%recordFields != 0 {
		return nil, fmt.Errorf("%d values for records of %d fields", len(v), recordFields)
	}
	recs := make([]idempotency.Record, 0, len(v)/recordFields)
	for i := 0; i < len(v); i += recordFields {
		r, err := parseRecord(v[i : i+recordFields])
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// Prefix returns the prefix of the store's keys.
func (s *Store) Prefix() string { return s.prefix }
