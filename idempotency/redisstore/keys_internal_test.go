package redisstore

import (
	"cmp"
	"strings"
	"testing"
)

// The parked set orders members byte-wise: their order must be the order of
// (caller, key), whatever the bytes (NUL, 0xFF) and lengths.
func FuzzParkedOrder(f *testing.F) {
	f.Add("a", "b", "a\x00", "")
	f.Add("", "k", "", "k\x00")
	f.Add("ab", "a", "a", "z")
	f.Add("a\xff", "", "a", "\xff")
	f.Fuzz(func(t *testing.T, c1, k1, c2, k2 string) {
		want := cmp.Or(cmp.Compare(c1, c2), cmp.Compare(k1, k2))
		id1, _ := recordID(c1, k1, 1)
		id2, _ := recordID(c2, k2, 1)
		got := strings.Compare(parkedMember(c1, k1, id1), parkedMember(c2, k2, id2))
		if want != 0 && got != want {
			t.Fatalf("(%q, %q) vs (%q, %q): members compare %d, pairs %d", c1, k1, c2, k2, got, want)
		}
		// The cursor after a pair is past all its members and before
		// every greater pair's.
		cursor := orderedPrefix(c1, k1) + "\xff"
		if m := parkedMember(c1, k1, id1); m >= cursor {
			t.Fatalf("the cursor after (%q, %q) is not past its member", c1, k1)
		}
		if want < 0 && parkedMember(c2, k2, id2) <= cursor {
			t.Fatalf("(%q, %q) sorts before the cursor after (%q, %q)", c2, k2, c1, k1)
		}
	})
}

// Distinct pairs never share a record id, however they split.
func TestRecordIDsDiffer(t *testing.T) {
	seen := map[string][2]string{}
	for _, p := range [][2]string{{"a", "bc"}, {"ab", "c"}, {"abc", ""}, {"", "abc"}, {"a\x00", "b"}, {"a", "\x00b"}} {
		id, shard := recordID(p[0], p[1], DefaultShards)
		if shard < 0 || shard >= DefaultShards || len(id) != idLen {
			t.Fatalf("%q: id %q shard %d", p, id, shard)
		}
		if q, dup := seen[id]; dup {
			t.Fatalf("%q and %q share id %s", p, q, id)
		}
		seen[id] = p
	}
}
