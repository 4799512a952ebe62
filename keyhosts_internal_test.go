package retry

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A host's state settles from the answers of the keyed requests out to it;
// the channel a waiter gets is closed when it settles, or when the last of
// them ends without showing anything. A host shown to honour keys is not
// taken back by an answer without the echo; one shown to ignore them is,
// by one with it.
func TestKeyHostsSettle(t *testing.T) {
	var k keyHosts
	st, ch := k.await("h")
	assert.Equal(t, keysUnknown, st)
	assert.Nil(t, ch, "nothing out: nothing to wait for")

	assert.True(t, k.sending("h"))
	assert.True(t, k.sending("h"))
	st, ch = k.await("h")
	assert.Equal(t, keysUnknown, st)
	k.answered("h", true, keysUnknown) // a reset: one still out
	assert.False(t, isClosed(ch))
	k.answered("h", true, keysUnknown)
	assert.True(t, isClosed(ch), "none out any more")
	assert.Empty(t, k.hosts, "an unknown host is kept only while requests are out")

	assert.True(t, k.sending("h"))
	_, ch = k.await("h")
	k.answered("h", true, keysIgnored)
	assert.True(t, isClosed(ch))
	st, ch = k.await("h")
	assert.Equal(t, keysIgnored, st)
	assert.Nil(t, ch)
	assert.False(t, k.sending("h"), "a known host: not counted")
	assert.False(t, k.honours("h"))

	k.answered("h", false, keysHonoured)
	assert.True(t, k.honours("h"), "an echo overrules")
	k.answered("h", false, keysIgnored)
	assert.True(t, k.honours("h"), "and is not taken back")
}

// The hosts remembered are bounded: past maxKeyHosts one known host with
// nothing out is forgotten for each new one; a host with requests out is
// never forgotten, so those are bounded by the requests in flight.
func TestKeyHostsAreBounded(t *testing.T) {
	var k keyHosts
	assert.True(t, k.sending("busy"))
	for i := range 2 * maxKeyHosts {
		k.answered("h"+strconv.Itoa(i), false, keysIgnored)
	}
	assert.Len(t, k.hosts, maxKeyHosts)
	assert.NotNil(t, k.hosts["busy"])
	k.answered("busy", true, keysHonoured)
	assert.True(t, k.honours("busy"))
}

// Many requests at once to a few hosts: every wait ends, with the state
// the answers showed.
func TestKeyHostsConcurrentUse(t *testing.T) {
	var k keyHosts
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			host := "h" + strconv.Itoa(i%4)
			for j := range 100 {
				counted := k.sending(host)
				shown := keysUnknown
				if j == 99 && i%4 == 0 {
					shown = keysHonoured
				}
				k.answered(host, counted, shown)
				if _, ch := k.await(host); ch != nil {
					<-ch // closed once what is out ends
				}
			}
		})
	}
	wg.Wait()
	assert.True(t, k.honours("h0"))
	assert.Len(t, k.hosts, 1, "unknown hosts with nothing out are not kept")
}
