package redisstore

import (
	"sync/atomic"
	"time"
)

// Option configures a Store.
type Option interface {
	apply(*config)
}

// optionFunc makes a func an Option.
type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix string
	shards int
	shift  *TimeShift
}

// Defaults of a Store.
const (
	// DefaultPrefix starts the name of every key a Store writes.
	DefaultPrefix = "exactlyonce"
	// DefaultShards is how many shards a Store spreads its records over.
	DefaultShards = 16
	// MaxShards is the most shards a Store takes.
	MaxShards = 1024
)

// WithPrefix sets the prefix of every key the store writes (default
// DefaultPrefix). Stores with different prefixes on one server never see each
// other's records. It must not contain '{' or '}', which delimit Redis
// Cluster hash tags.
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) { c.prefix = prefix })
}

// WithShards sets how many shards the records are spread over (default
// DefaultShards, at most MaxShards). The keys of one shard share a hash tag,
// so on Redis Cluster each shard lives on one node and the shards spread over
// the nodes; a store's batch operations (TakeOverStalled, ListParked,
// DeleteExpired) make one call per shard, pipelined. Every instance using a
// prefix must use the same number of shards, and it must never change while
// records live: a record is looked for in one shard only.
func WithShards(n int) Option {
	return optionFunc(func(c *config) { c.shards = n })
}

// WithTimeShift is test support: every time the store reads from the Redis
// clock (TIME) it adds the shift's current offset, so a test can move a store
// past a lease or an expiry without waiting. Several stores may share one
// TimeShift. Production code never needs it.
func WithTimeShift(ts *TimeShift) Option {
	return optionFunc(func(c *config) { c.shift = ts })
}

// TimeShift is test support: an offset added to the Redis clock by the
// stores built WithTimeShift(ts). The zero value is no offset; a nil
// *TimeShift is also no offset. Safe for concurrent use.
type TimeShift struct {
	micros atomic.Int64
}

// Advance moves the shifted clock forward by d.
func (ts *TimeShift) Advance(d time.Duration) {
	ts.micros.Add(d.Microseconds())
}

// Offset returns the current offset.
func (ts *TimeShift) Offset() time.Duration {
	if ts == nil {
		return 0
	}
	return time.Duration(ts.micros.Load()) * time.Microsecond
}

// offsetMicros returns the offset in microseconds, the unit the scripts take.
func (ts *TimeShift) offsetMicros() int64 {
	if ts == nil {
		return 0
	}
	return ts.micros.Load()
}
