package retry

import (
	"crypto/rand"
	"regexp"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewKeyIsAVersion4UUIDAndUnique(t *testing.T) {
	quoted := regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				k := newKey(false)
				mu.Lock()
				seen[k] = true
				mu.Unlock()
				if !quoted.MatchString(k) {
					t.Errorf("key %q is not a quoted version 4 UUID", k)
					return
				}
				token := newKey(true)
				if _, err := uuid.Parse(token); err != nil || len(token) != 36 {
					t.Errorf("token key %q: %v", token, err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 8000, "no key repeats")
	assert.True(t, quoted.MatchString(newKey(false)))
}

// BenchmarkNewKey compares making a key with the uuid package and with a
// crypto/rand read per key.
func BenchmarkNewKey(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = newKey(false)
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
