package pgstore

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
	schema string
	shift  *TimeShift
}

// WithSchema sets the schema holding the store's tables (default DefaultSchema;
// an empty name is DefaultSchema too, as for Migrate, so one setting, empty
// or not, serves both). The schema must have been prepared with Migrate.
func WithSchema(schema string) Option {
	return optionFunc(func(c *config) { c.schema = schema })
}

// WithTimeShift is test support: every time the store reads from the database
// clock it adds the shift's current offset, so a test can move a store past a
// lease or an expiry without waiting. Several stores may share one TimeShift.
// Production code never needs it.
func WithTimeShift(ts *TimeShift) Option {
	return optionFunc(func(c *config) { c.shift = ts })
}

// TimeShift is test support: an offset added to the database clock (now()) by
// the stores built WithTimeShift(ts). The zero value is no offset; a nil
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

// micros returns the offset in microseconds, the unit the queries take.
func (ts *TimeShift) offsetMicros() int64 {
	if ts == nil {
		return 0
	}
	return ts.micros.Load()
}
