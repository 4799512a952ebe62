package retry

import (
	"crypto/rand"
	"testing"

	"github.com/google/uuid"
)

// BenchmarkNewKey compares making a key in the round trip's own buffer with
// the uuid package and with crypto/rand read per key.
func BenchmarkNewKey(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		var buf [38]byte
		for b.Loop() {
			newKeyInto(&buf, false)
		}
	})
	b.Run("uuid.NewString", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = uuid.NewString()
		}
	})
	b.Run("crypto-rand-16", func(b *testing.B) {
		b.ReportAllocs()
		var u [16]byte
		for b.Loop() {
			rand.Read(u[:])
		}
	})
}
