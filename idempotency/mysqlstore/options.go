package mysqlstore

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
	shift  *TimeShift
}

// DefaultTablePrefix starts the names of the store's tables.
const DefaultTablePrefix = "exactlyonce_"

// WithTablePrefix sets the prefix of the store's table names (default
// DefaultTablePrefix): prefix + "idempotency_keys" and prefix +
// "idempotency_generations". The tables must have been made with Migrate
// and the same prefix. Letters, digits and underscores, at most 32.
func WithTablePrefix(prefix string) Option {
	return optionFunc(func(c *config) { c.prefix = prefix })
}

// WithTimeShift is test support: every time the store reads the database
// clock it adds the shift's current offset, so a test can move a store past
// a lease or an expiry without waiting. Several stores may share one
// TimeShift. Production code never needs it.
func WithTimeShift(ts *TimeShift) Option {
	return optionFunc(func(c *config) { c.shift = ts })
}

// TimeShift is test support: an offset added to the database clock by the
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

func (ts *TimeShift) offsetMicros() int64 {
	if ts == nil {
		return 0
	}
	return ts.micros.Load()
}
