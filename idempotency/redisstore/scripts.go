package redisstore

import "github.com/redis/go-redis/v9"

// The scripts. Each runs atomically on the node that holds its keys, so
// every operation on a record is one script call: one round trip.
//
// A record is a hash with these fields (all strings; times in microseconds
// since the Unix epoch, on the Redis clock plus the test shift):
//
//	c   caller              k   key              fp  fingerprint
//	st  1 in progress, 2 completed               at  attempt
//	g   generation          lu  locked until     pt  recovery point
//	dt  recovery data       rs  response         rm  resume
//	pk  parked reason ("" when not parked)       pm  its parked-set member
//	ca  created at          ex  expires at
//
// A record is returned to Go as the fields c ... ex in that order (pm is
// not), after a one-letter outcome where there is one.

// prelude is shared by every script. ARGV[1] is always the test shift in
// microseconds. Numbers are Lua doubles: times in microseconds (about 1.8e15)
// and generations (kept below 2^53, see newGeneration) are exact, and fmt
// writes them back without an exponent (all of them integral).
const prelude = `
local F = {'c','k','fp','st','at','g','lu','pt','dt','rs','rm','pk','ca','ex'}
local C, K, FP, ST, AT, G, LU, PT, DT, RS, RM, PK, CA, EX = 1,2,3,4,5,6,7,8,9,10,11,12,13,14
local FI = {c=1, k=2, fp=3, st=4, at=5, g=6, lu=7, pt=8, dt=9, rs=10, rm=11, pk=12, ca=13, ex=14}

-- fmt writes an integral number without exponent: with %d where a C long
-- holds every number here (64 bits), much cheaper than %.0f, which a
-- 32-bit build keeps.
local FMT = '%.0f'
if string.format('%d', 2^40) == '1099511627776' then FMT = '%d' end
local function fmt(n) return string.format(FMT, n) end

local function now_us()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1])
end

-- load returns the record at key (a missing field: ''), or nil, and its
-- parked-set member (nil when it has none): one HGETALL, which costs a
-- missing key nothing per field.
local function load(key)
	local h = redis.call('HGETALL', key)
	if #h == 0 then return nil end
	local v = {'', '', '', '', '', '', '', '', '', '', '', '', '', ''}
	local found, pm = false, nil
	for i = 1, #h, 2 do
		local j = FI[h[i]]
		if j then
			v[j] = h[i + 1]
			if j == C then found = true end
		elseif h[i] == 'pm' then
			pm = h[i + 1]
		end
	end
	if not found then return nil end
	return v, pm
end

-- FENCE are the fields the fenced writes read, with the parked-set member:
-- not the fingerprint, the creation time, the response, nor the recovery
-- data, which may be large.
local FENCE = {'c', 'k', 'st', 'at', 'g', 'lu', 'pt', 'rm', 'pk', 'ex', 'pm'}

-- load_fence returns the record at key with only the fields of FENCE (the
-- others ''), or nil, and its parked-set member (nil when it has none):
-- one HMGET.
local function load_fence(key)
	local f = redis.call('HMGET', key, unpack(FENCE))
	if not f[1] then return nil end
	return {f[1], f[2] or '', '', f[3] or '', f[4] or '', f[5] or '', f[6] or '', f[7] or '', '', '',
		f[8] or '', f[9] or '', '', f[10] or ''}, f[11] or nil
end

-- same checks that the record is the one of (caller, key): its id is a
-- SHA-256 of both, so another pair is never found, but a hash collision
-- must not mix two records either.
local function same(v, caller, key)
	if v[C] ~= caller or v[K] ~= key then
		error('exactlyonce: two records share a key name')
	end
end

local function flat(outcome, v)
	local out = {outcome}
	for i = 1, #F do out[i + 1] = v[i] end
	return out
end

-- index keeps the stalled set in step with v: a begun, unparked,
-- in-progress record is in it, scored by the end of its lease.
local function index(stalled, v, id)
	if v[ST] == '1' and v[PT] ~= '' and v[PK] == '' then
		redis.call('ZADD', stalled, v[LU], id)
	else
		redis.call('ZREM', stalled, id)
	end
end

-- unpark takes the record at key, whose parked-set member is pm (nil: it
-- has none), out of its shard's parked set. A record has a member only
-- while its parked reason is not empty (Park writes both).
local function unpark(key, parked, pm)
	if pm then
		redis.call('ZREM', parked, pm)
		redis.call('HDEL', key, 'pm')
	end
end

-- forget deletes the record at key, whose parked-set member is pm, and its
-- index entries.
local function forget(key, exp, stalled, parked, id, pm)
	if pm then redis.call('ZREM', parked, pm) end
	redis.call('DEL', key)
	redis.call('ZREM', exp, id)
	redis.call('ZREM', stalled, id)
end

-- gens holds the last generation given by each shard's counter (by its
-- key) in this script call; new_gen gives the next one and save_gens,
-- which every script that calls new_gen calls before it returns, writes
-- each counter once, however many records the call created.
local gens = {}

-- new_gen returns a generation the shard of the counter at key never gave:
-- above the last one given, and never below the clock, so that it stays
-- above every generation given before even if the counter was lost (a
-- restart without persistence).
local function new_gen(key, now)
	local g = gens[key]
	if not g then g = tonumber(redis.call('GET', key) or '0') end
	g = g + 1
	if g < now then g = now end
	gens[key] = g
	return g
end

local function save_gens()
	for key, g in pairs(gens) do redis.call('SET', key, fmt(g)) end
	gens = {}
end
`

// claimScript creates, replaces, takes over or reports a record.
// KEYS: record, exp, stalled, parked, gen.
// ARGV: shift, caller, key, id, fingerprint, lease, ttl, has resume (0/1),
// resume, the recovery point a new record starts with (empty for none; a
// takeover gives it to a record that has none).
// Returns the outcome (t taken over, p in progress, c completed, m
// mismatch) and the record, or, for a record it created, n, its generation
// and the time of its creation (the rest of it is the claim's: see
// parseClaim). A record in progress without a recovery point is given the
// claim's (and its resume, if it has none).
const claimScript = prelude + claimFunc + `
local r = claim(KEYS, ARGV, 0, 0, now_us())
save_gens()
return r
`

// claimFunc is the claim script's body as a function of its KEYS, ARGV,
// the offsets k and a of the claim's keys and arguments in them (its
// record is KEYS[k + 1], its caller ARGV[a + 2]: the shift stays ARGV[1])
// and the time, shared by the claim script and the batch claim script.
// Both call save_gens after it.
const claimFunc = `
local function claim(KEYS, ARGV, k, a, now)
local rec, exp, stalled, parked = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
local caller, key, id, fp = ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
local lease, ttl, point = tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7]), ARGV[a + 10]
local resume = false
if ARGV[a + 8] == '1' then resume = ARGV[a + 9] end
local v, pm = load(rec)
if v then
	same(v, caller, key)
	if tonumber(v[EX]) > now then
		if v[FP] ~= fp then return flat('m', v) end
		if v[ST] == '2' then return flat('c', v) end
		if tonumber(v[LU]) > now then
			-- Held by another execution: a claim with a point gives it
			-- (and its resume, if it has none) to a record without one,
			-- and leaves the execution to its holder.
			if v[PT] == '' and point ~= '' then
				v[PT] = point
				if v[RM] == '' and resume then v[RM] = resume end
				redis.call('HSET', rec, 'pt', v[PT], 'rm', v[RM])
				index(stalled, v, id)
			end
			return flat('p', v)
		end
		v[AT] = fmt(tonumber(v[AT]) + 1)
		v[LU] = fmt(now + lease)
		unpark(rec, parked, pm)
		v[PK] = ''
		if resume then v[RM] = resume end
		if v[PT] == '' then v[PT] = point end
		redis.call('HSET', rec, 'at', v[AT], 'lu', v[LU], 'pk', '', 'rm', v[RM], 'pt', v[PT])
		index(stalled, v, id)
		return flat('t', v)
	end
	forget(rec, exp, stalled, parked, id, pm)
end
-- A new record. Its empty fields (recovery data, response, parked reason,
-- and the point and resume when it has none) are not written: every
-- version reads a missing field as empty.
local g = fmt(new_gen(KEYS[k + 5], now))
local lu, ex = fmt(now + lease), fmt(now + ttl)
local ca = fmt(now)
local fields = {'c', caller, 'k', key, 'fp', fp, 'st', '1', 'at', '1', 'g', g, 'lu', lu, 'ca', ca, 'ex', ex}
if point ~= '' then
	fields[19] = 'pt'
	fields[20] = point
end
if resume and resume ~= '' then
	fields[#fields + 1] = 'rm'
	fields[#fields + 1] = resume
end
redis.call('HSET', rec, unpack(fields))
redis.call('ZADD', exp, ex, id)
-- A begun record goes in the stalled set. One without a point is not in
-- it: the record did not exist (forget dropped an expired one's entry),
-- and an entry left by a hash gone some other way (Redis's own expiry
-- below) is dropped by TakeOverStalled, as any entry that no longer
-- belongs.
if point ~= '' then redis.call('ZADD', stalled, lu, id) end
-- Redis drops the hash by itself a day after it expired, should no sweeper
-- ever run; the sweeper removes it (and its index entries) before that.
redis.call('PEXPIREAT', rec, fmt(math.ceil((now + ttl - tonumber(ARGV[1])) / 1000) + 86400000))
return {'n', g, ca}
end
`

// getScript reads the live record.
// KEYS: record. ARGV: shift, caller, key.
// Returns the record, or an empty array.
const getScript = prelude + `
local v = load(KEYS[1])
if not v then return {} end
same(v, ARGV[2], ARGV[3])
if tonumber(v[EX]) <= now_us() then return {} end
return flat('', v)
`

// fenced is the check shared by the fenced writes: the live in-progress
// record whose attempt and generation are ARGV[5] and ARGV[6], or nil.
const fenced = prelude + fencedFunc + `
local now = now_us()
local v, pm = fenced(KEYS, ARGV, 0, 0, now)
if not v then return 0 end
`

// fencedFunc is the fence check as a function of the script's KEYS, ARGV,
// the offsets of the write's keys and arguments in them (as claimFunc's)
// and the time: it returns the record (the fields of FENCE) and its
// parked-set member, as load_fence.
const fencedFunc = `
local function fenced(KEYS, ARGV, k, a, now)
	local v, pm = load_fence(KEYS[k + 1])
	if not v then return nil end
	same(v, ARGV[a + 2], ARGV[a + 3])
	if v[ST] ~= '1' or v[AT] ~= ARGV[a + 5] or v[G] ~= ARGV[a + 6] or tonumber(v[EX]) <= now then return nil end
	return v, pm
end
`

// The fenced writes. KEYS: record, exp, stalled, parked.
// ARGV: shift, caller, key, id, attempt, generation, then their own.
// Each returns 1, or 0 when the fence no longer holds (and changes nothing).
const (
	// ARGV[7] point, ARGV[8] data, ARGV[9] lease. An empty point keeps
	// the record's point and data, if it has a point.
	saveScript = fenced + `
v[LU] = fmt(now + tonumber(ARGV[9]))
if ARGV[7] ~= '' or v[PT] == '' then
	v[PT] = ARGV[7]
	redis.call('HSET', KEYS[1], 'pt', v[PT], 'dt', ARGV[8], 'lu', v[LU])
else
	redis.call('HSET', KEYS[1], 'lu', v[LU])
end
index(KEYS[3], v, ARGV[4])
return 1
`
	// ARGV[7] response. The parked reason stays, as in every store.
	completeScript = prelude + fencedFunc + completeFunc + `
return complete(KEYS, ARGV, 0, 0, now_us())
`
	releaseScript = fenced + `
forget(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[4], pm)
return 1
`
	// A record with a recovery point is kept, its lease ended.
	releaseUnstartedScript = fenced + `
if v[PT] == '' then
	forget(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[4], pm)
	return 1
end
v[LU] = fmt(now)
redis.call('HSET', KEYS[1], 'lu', v[LU])
index(KEYS[3], v, ARGV[4])
return 1
`
	// ARGV[7] reason, ARGV[8] parked-set member.
	parkScript = fenced + `
v[PK] = ARGV[7]
v[LU] = fmt(now)
redis.call('HSET', KEYS[1], 'pk', v[PK], 'pm', ARGV[8], 'lu', v[LU])
redis.call('ZADD', KEYS[4], 0, ARGV[8])
index(KEYS[3], v, ARGV[4])
return 1
`
)

// completeFunc is the complete script's body as a function of its KEYS,
// ARGV, the offsets of the completion's keys and arguments in them (as
// claimFunc's) and the time, shared by the complete script and the batch complete
// script.
const completeFunc = `
local function complete(KEYS, ARGV, k, a, now)
	local v, pm = fenced(KEYS, ARGV, k, a, now)
	if not v then return 0 end
	local rec, response = KEYS[k + 1], ARGV[a + 7]
	-- index would take it out of the stalled set, where it is only if it
	-- began and is not parked.
	if v[PT] ~= '' and v[PK] == '' then redis.call('ZREM', KEYS[k + 3], ARGV[a + 4]) end
	v[ST] = '2'
	-- The response of an in-progress record is empty, if written at all:
	-- an empty one needs no writing, nor does clearing an empty resume.
	local fields = {'st', '2'}
	if response ~= '' then
		fields[3] = 'rs'
		fields[4] = response
	end
	if v[RM] ~= '' then
		fields[#fields + 1] = 'rm'
		fields[#fields + 1] = ''
	end
	redis.call('HSET', rec, unpack(fields))
	unpark(rec, KEYS[k + 4], pm)
	return 1
end
`

// dueScript lists up to ARGV[2] members of the sorted set KEYS[1] whose
// score is not after now (ARGV[1]: the shift), lowest first, with their
// scores: the stalled or expired records of a shard.
const dueScript = prelude + `
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now_us()), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
`

// dueOfScript lists the stalled records of the caller ARGV[3] in the
// stalled set KEYS[1], lowest score first, with their scores: it reads the
// set by rank from ARGV[5], up to ARGV[6] members (those whose score is
// after now end it), and the caller of each member's record (the key
// ARGV[4] .. id, of the same shard), and stops once it found ARGV[2].
// ARGV: shift, limit, caller, record key prefix, rank, members to read.
// Returns the rank to go on from (-1: no due member is left to read), the
// score of the last member read (empty for none), then id, score of each
// record found.
const dueOfScript = prelude + `
local now = now_us()
local limit, caller, prefix = tonumber(ARGV[2]), ARGV[3], ARGV[4]
local rank = tonumber(ARGV[5])
local stop = rank + tonumber(ARGV[6])
local out = {'-1', ''}
while rank < stop do
	local page = redis.call('ZRANGE', KEYS[1], rank, math.min(rank + 100, stop) - 1, 'WITHSCORES')
	if #page == 0 then return out end
	for i = 1, #page, 2 do
		if tonumber(page[i + 1]) > now then return out end
		out[2] = page[i + 1]
		rank = rank + 1
		if redis.call('HGET', prefix .. page[i], 'c') == caller then
			out[#out + 1] = page[i]
			out[#out + 1] = page[i + 1]
			if (#out - 2) / 2 >= limit then
				out[1] = fmt(rank)
				return out
			end
		end
	end
end
out[1] = fmt(rank)
return out
`

// takeOverScript takes over the stalled records among KEYS[4...] (their ids
// in ARGV[4...]), each only if it still is stalled: live, in progress, begun,
// not parked, its lease run out, and of the caller ARGV[3] unless that is
// empty. Records gone or not stalled are dropped from the stalled set (KEYS[1])
// when they no longer belong in it; a record of another caller is left as
// it is.
// KEYS: stalled, exp, parked, records... ARGV: shift, lease, caller, ids...
// Returns the records taken over, one after another.
const takeOverScript = prelude + `
local now = now_us()
local out = {}
for i = 4, #KEYS do
	local id = ARGV[i]
	local v = load(KEYS[i])
	if not v then
		redis.call('ZREM', KEYS[1], id)
	elseif ARGV[3] ~= '' and v[C] ~= ARGV[3] then
		-- another caller's: not ours to take over
	elseif tonumber(v[EX]) <= now then
		-- expired: the sweeper removes it
		redis.call('ZREM', KEYS[1], id)
	elseif v[ST] == '1' and v[PT] ~= '' and v[PK] == '' and tonumber(v[LU]) <= now then
		v[AT] = fmt(tonumber(v[AT]) + 1)
		v[LU] = fmt(now + tonumber(ARGV[2]))
		redis.call('HSET', KEYS[i], 'at', v[AT], 'lu', v[LU])
		index(KEYS[1], v, id)
		for j = 1, #F do out[#out + 1] = v[j] end
	else
		index(KEYS[1], v, id)
	end
end
return out
`

// deleteScript deletes the expired records among KEYS[4...] (ids in
// ARGV[2...]), each only if it still is expired, and drops the ids of
// records already gone from the expiry set.
// KEYS: exp, stalled, parked, records... ARGV: shift, ids...
// Returns how many records it deleted.
const deleteScript = prelude + `
local now = now_us()
local n = 0
for i = 4, #KEYS do
	local id = ARGV[i - 2]
	local ex = redis.call('HGET', KEYS[i], 'ex')
	if not ex then
		if redis.call('ZREM', KEYS[1], id) == 1 then n = n + 1 end
		redis.call('ZREM', KEYS[2], id)
	elseif tonumber(ex) <= now then
		forget(KEYS[i], KEYS[1], KEYS[2], KEYS[3], id, redis.call('HGET', KEYS[i], 'pm'))
		n = n + 1
	end
end
return n
`

// parkedScript reads the records KEYS[...] and returns those that are live,
// in progress and parked, one after another. ARGV: shift.
const parkedScript = prelude + `
local now = now_us()
local out = {}
for i = 1, #KEYS do
	local v = load(KEYS[i])
	if v and v[ST] == '1' and v[PK] ~= '' and tonumber(v[EX]) > now then
		for j = 1, #F do out[#out + 1] = v[j] end
	end
end
return out
`

var (
	claimLua            = redis.NewScript(claimScript)
	getLua              = redis.NewScript(getScript)
	saveLua             = redis.NewScript(saveScript)
	completeLua         = redis.NewScript(completeScript)
	releaseLua          = redis.NewScript(releaseScript)
	releaseUnstartedLua = redis.NewScript(releaseUnstartedScript)
	parkLua             = redis.NewScript(parkScript)
	dueLua              = redis.NewScript(dueScript)
	dueOfLua            = redis.NewScript(dueOfScript)
	takeOverLua         = redis.NewScript(takeOverScript)
	deleteLua           = redis.NewScript(deleteScript)
	parkedLua           = redis.NewScript(parkedScript)
	recordFields        = 14
)
