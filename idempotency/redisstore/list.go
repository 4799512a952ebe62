package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/redis/go-redis/v9"
)

var _ idempotency.Lister = (*Store)(nil)

// listBatch is how many members of a shard's expiry set one ZSCAN asks for.
const listBatch = 200

// listScript returns the Redis clock, then the fields of every live record
// among the first ARGV[2] KEYS (the others only route the call).
const listScript = prelude + `
local now = now_us()
local out = {fmt(now)}
for i = 1, tonumber(ARGV[2]) do
	local v = load(KEYS[i])
	if v and tonumber(v[EX]) > now then
		for j = 1, #F do out[#out + 1] = v[j] end
	end
end
return out
`

var listLua = redis.NewScript(listScript)

// listCursor is where a List goes on: a shard, a ZSCAN cursor of its expiry
// set, and the last record id of that cursor's batch already listed.
type listCursor struct {
	shard  int
	zscan  uint64
	lastID string
}

func (c listCursor) String() string {
	return strconv.Itoa(c.shard) + "." + strconv.FormatUint(c.zscan, 10) + "." + c.lastID
}

func (s *Store) parseListCursor(v string) (listCursor, error) {
	if v == "" {
		return listCursor{}, nil
	}
	bad := fmt.Errorf("%w: malformed cursor", idempotency.ErrInvalidList)
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return listCursor{}, bad
	}
	shard, err1 := strconv.Atoi(parts[0])
	zscan, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || shard < 0 || shard >= len(s.shards) || (parts[2] != "" && len(parts[2]) != idLen) {
		return listCursor{}, bad
	}
	return listCursor{shard: shard, zscan: zscan, lastID: parts[2]}, nil
}

// List implements idempotency.Lister. It walks each shard's expiry set
// (every record of the shard) with ZSCAN, a batch at a time, reads the
// records of a batch with one script, and stops once the page is full or
// it read q.ScanSize() records: a page never reads the whole
// store. As with SCAN, a record may be listed twice while the sets grow or
// shrink.
func (s *Store) List(ctx context.Context, q idempotency.ListQuery) (idempotency.ListPage, error) {
	if err := q.Validate(); err != nil {
		return idempotency.ListPage{}, err
	}
	cur, err := s.parseListCursor(q.Cursor)
	if err != nil {
		return idempotency.ListPage{}, err
	}
	limit := q.PageSize()
	var page idempotency.ListPage
	for scanned := 0; cur.shard < len(s.shards) && scanned < q.ScanSize(); {
		k := s.shards[cur.shard]
		members, next, err := s.rdb.ZScan(ctx, k.exp, cur.zscan, "", listBatch).Result()
		if err != nil {
			return idempotency.ListPage{}, fmt.Errorf("redisstore: list: %w", classify(err))
		}
		var ids []string
		for i := 0; i < len(members); i += 2 { // member, score
			if id := members[i]; id > cur.lastID && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		scanned += len(members) / 2
		slices.Sort(ids)
		found, now, err := s.listRecords(ctx, k, ids)
		if err != nil {
			return idempotency.ListPage{}, err
		}
		page.Now = now
		for _, f := range found {
			if !q.Matches(f.rec, now) {
				continue
			}
			if len(page.Records) == limit {
				page.Next = cur.String()
				return page, nil
			}
			page.Records = append(page.Records, f.rec)
			cur.lastID = f.id
		}
		cur.zscan, cur.lastID = next, ""
		if next == 0 {
			cur.shard++
		}
	}
	if cur.shard < len(s.shards) {
		page.Next = cur.String()
	}
	if page.Now.IsZero() {
		now, err := s.Now(ctx)
		if err != nil {
			return idempotency.ListPage{}, err
		}
		page.Now = now
	}
	return page, nil
}

type listed struct {
	id  string
	rec idempotency.Record
}

// listRecords reads the live records of ids in shard k, in the order of ids,
// and the Redis clock.
func (s *Store) listRecords(ctx context.Context, k shardKeys, ids []string) ([]listed, time.Time, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = k.record(id)
	}
	if len(keys) == 0 {
		// A script needs a key to run on the shard's node.
		keys = []string{k.exp}
	}
	v, err := listLua.Run(ctx, s.rdb, keys, s.shiftArg(), len(ids)).Slice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("redisstore: list: %w", classify(err))
	}
	us, err := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("redisstore: list: clock %q", v[0])
	}
	if len(ids) == 0 {
		return nil, time.UnixMicro(us), nil
	}
	recs, err := parseRecords(v[1:])
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("redisstore: list: %w", err)
	}
	out := make([]listed, len(recs))
	for i, r := range recs {
		id, _ := recordID(r.Caller, r.Key, len(s.shards))
		out[i] = listed{id: id, rec: r}
	}
	slices.SortFunc(out, func(a, b listed) int { return strings.Compare(a.id, b.id) })
	return out, time.UnixMicro(us), nil
}

// Now implements idempotency.Lister: the Redis clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	_, now, err := s.listRecords(ctx, s.shards[0], nil)
	return now, err
}
