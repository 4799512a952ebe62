package pgstore_test

import (
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after a bound. It
// yields between polls with a short timer, never a blind sleep for an
// expected duration.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 30s")
		}
		<-tick.C
	}
}
