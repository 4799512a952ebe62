package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The meter tells the rate of the last whole window before a moment: the
// window a failure falls in is not yet whole, and one that ended longer
// ago than the window before says nothing of now.
func TestAnswerMeterRate(t *testing.T) {
	var m answerMeter
	base := time.Unix(0, 0).Add(100 * meterWidth)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	assert.Zero(t, m.rate(at(0)), "nothing answered yet")
	for i := range 50 { // 50 answers in the first window: 500 a second
		m.mark(at(time.Duration(i) * meterWidth / 50))
	}
	assert.Zero(t, m.rate(at(meterWidth/2)), "the window is not whole yet, and none came before it")
	assert.InDelta(t, 500, m.rate(at(meterWidth+meterWidth/2)), 1e-9, "the window just ended")
	for i := range 20 { // 20 in the next: 200 a second
		m.mark(at(meterWidth + time.Duration(i)*meterWidth/20))
	}
	assert.InDelta(t, 500, m.rate(at(meterWidth+meterWidth/2)), 1e-9, "the whole window before")
	assert.InDelta(t, 200, m.rate(at(2*meterWidth+1)), 1e-9)
	assert.Zero(t, m.rate(at(3*meterWidth+1)), "a window passed without answers")
	m.mark(at(5 * meterWidth)) // after a gap: the window before it had none
	assert.Zero(t, m.rate(at(5*meterWidth+1)))
	assert.InDelta(t, 10, m.rate(at(6*meterWidth)), 1e-9)
}
