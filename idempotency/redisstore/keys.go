package redisstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
)

// Key layout. Every key of shard s starts with the hash tag "{prefix:s}", so
// a record and the indexes of its shard always hash to one Redis Cluster
// slot and one script can change them together:
//
//	{prefix:s}:r:<id>   the record, a hash (see scripts.go for its fields)
//	{prefix:s}:exp      sorted set of the shard's records by expiry
//	{prefix:s}:stalled  sorted set of its begun, unparked, in-progress
//	                    records by the end of their lease
//	{prefix:s}:parked   sorted set (all scores 0) of its parked records,
//	                    ordered by caller then key (see parkedMember)
//	{prefix:s}:gen      the last generation the shard gave a record
//
// id is the hex SHA-256 of the caller's length, the caller and the key, so
// that a caller or key of any length and bytes makes a short key name, and
// (caller, key) pairs are never confused by concatenation. Every script also
// compares the caller and key stored in the record with the ones asked for.

// recordID returns the id of (caller, key) and the shard it lives in.
func recordID(caller, key string, shards int) (string, int) {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(caller)))])
	h.Write([]byte(caller))
	h.Write([]byte(key))
	sum := h.Sum(nil)
	return hex.EncodeToString(sum), int(binary.BigEndian.Uint32(sum[:4]) % uint32(shards))
}

// shardKeys are the names of one shard's keys.
type shardKeys struct {
	tag, exp, stalled, parked, gen string
}

func newShardKeys(prefix string, shard int) shardKeys {
	tag := "{" + prefix + ":" + strconv.Itoa(shard) + "}"
	return shardKeys{tag: tag, exp: tag + ":exp", stalled: tag + ":stalled", parked: tag + ":parked", gen: tag + ":gen"}
}

// record returns the name of the record with id in the shard.
func (k shardKeys) record(id string) string { return k.tag + ":r:" + id }

// parkedMember is the member of a parked record in its shard's parked set:
// caller and key encoded so that byte order of members is the order of
// (caller, key) (each escapes 0x00 as 0x00 0xFF and ends with 0x00 0x01, so
// a shorter string sorts first and no string is a prefix of another's
// encoding), then the record's id, 64 hex digits.
func parkedMember(caller, key, id string) string {
	var b strings.Builder
	b.Grow(len(caller) + len(key) + 4 + len(id))
	b.WriteString(orderedPrefix(caller, key))
	b.WriteString(id)
	return b.String()
}

// orderedPrefix encodes (caller, key) for parkedMember.
func orderedPrefix(caller, key string) string {
	var b strings.Builder
	for _, s := range [2]string{caller, key} {
		for i := 0; i < len(s); i++ {
			b.WriteByte(s[i])
			if s[i] == 0 {
				b.WriteByte(0xFF)
			}
		}
		b.WriteString("\x00\x01")
	}
	return b.String()
}

// idLen is the length of a record id in a parked member.
const idLen = 2 * sha256.Size
