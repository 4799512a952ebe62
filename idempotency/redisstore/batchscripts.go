package redisstore

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The batch scripts run the claim or complete function of scripts.go once
// per item of a batch, in the order given, in one script call: one command
// for the server to run instead of one per key. Each item has the KEYS and
// ARGV the per-key script takes (less the shift, which is the batch's
// ARGV[1]), one item after another; all items see one time. An item that
// fails (a record whose caller and key differ from the ones asked for) gives
// {'e', message} in its place and leaves the others be, as a failed script
// in a pipeline does. The shards' generation counters the items moved are
// written once, after the last item.

// eachItem runs op on every item: KEYS in groups of nk, ARGV[1] the shift
// and then groups of na. It returns op's replies, one per item.
const eachItem = `
local function each(op, nk, na)
	local now = now_us()
	local out = {}
	for i = 0, #KEYS / nk - 1 do
		local ok, r = pcall(op, KEYS, ARGV, i * nk, i * na, now)
		if not ok then
			if type(r) == 'table' then r = r.err end
			r = {'e', tostring(r)}
		end
		out[i + 1] = r
	end
	save_gens()
	return out
end
`

// Items of the batch scripts: how many KEYS and ARGV (beyond the shift)
// each takes.
const (
	claimItemKeys    = 5
	claimItemArgs    = 9
	completeItemKeys = 4
	completeItemArgs = 6
)

var (
	// claimBatchLua claims every item as the claim script does; it returns
	// one claim reply (or error item) per item.
	claimBatchLua = redis.NewScript(prelude + claimFunc + eachItem +
		fmt.Sprintf("return each(claim, %d, %d)\n", claimItemKeys, claimItemArgs))
	// completeBatchLua completes every item as the complete script does; it
	// returns 1 or 0 (or an error item) per item.
	completeBatchLua = redis.NewScript(prelude + fencedFunc + completeFunc + eachItem +
		fmt.Sprintf("return each(complete, %d, %d)\n", completeItemKeys, completeItemArgs))
)
