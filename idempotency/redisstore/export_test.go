package redisstore

// SetStalledScan sets how many members of a shard's stalled set one round
// trip of TakeOverStalled for one caller reads at most, so that a test can
// make it read on past other callers' records without creating thousands.
func SetStalledScan(s *Store, n int) { s.stalledScan = n }

// ShardOf returns the shard of s that holds the record of (caller, key).
func ShardOf(s *Store, caller, key string) int {
	_, shard := recordID(caller, key, len(s.shards))
	return shard
}

// RecordKey returns the name of the hash that holds the record of (caller,
// key) in s.
func RecordKey(s *Store, caller, key string) string {
	id, k := s.at(caller, key)
	return k.record(id)
}
