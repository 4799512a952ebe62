package opsui_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/opsui"
)

// The overview shows what needs attention: the first parked and stalled
// executions.
func TestOverviewShowsParkedAndStalled(t *testing.T) {
	w := newWorld(t)
	w.park(t, "order-1")
	w.stall(t, "order-2")
	w.complete(t, "shop", "order-3")
	h := w.page(opsui.Config{Authorize: allowAll})
	o := decode[opsui.Overview](t, get(h, base+"/?format=json", ""))
	require.Len(t, o.Attention, 2)
	assert.Equal(t, "order-1", o.Attention[0].Key)
	assert.Equal(t, "parked", o.Attention[0].State)
	assert.Equal(t, "order-2", o.Attention[1].Key)
	assert.Equal(t, "stalled", o.Attention[1].State)
	assert.Contains(t, get(h, base+"/", "text/html").Body.String(), `data-key="order-1"`)
}
