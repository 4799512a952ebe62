package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The meter tells the rate of the last meterWidth or so before a moment:
// the current window with the one before it, the first window alone, and
// nothing once a whole window passed without answers.
func TestAnswerMeterRate(t *testing.T) {
	var m answerMeter
	base := time.Unix(0, 0).Add(100 * meterWidth)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	assert.Zero(t, m.rate(at(0)), "nothing answered yet")
	for i := range 25 { // 25 answers in the first half of the first window: 500 a second
		m.mark(at(time.Duration(i) * meterWidth / 50))
	}
	assert.InDelta(t, 500, m.rate(at(meterWidth/2)), 1e-9, "the first window alone")
	assert.InDelta(t, 25/meterMinSpan.Seconds(), m.rate(at(0)), 1e-9, "over meterMinSpan at least")
	for i := 25; i < 50; i++ {
		m.mark(at(time.Duration(i) * meterWidth / 50))
	}
	assert.InDelta(t, 500, m.rate(at(meterWidth)), 1e-9, "the window just ended")
	for i := range 10 { // 10 in the first half of the next: 200 a second
		m.mark(at(meterWidth + time.Duration(i)*meterWidth/20))
	}
	assert.InDelta(t, 60/(1.5*meterWidth.Seconds()), m.rate(at(meterWidth+meterWidth/2)), 1e-9,
		"the window before and the current one")
	assert.Zero(t, m.rate(at(3*meterWidth+1)), "a window passed without answers")
	m.mark(at(5 * meterWidth)) // after a gap: the window before it had none
	assert.InDelta(t, 1/(1.5*meterWidth.Seconds()), m.rate(at(5*meterWidth+meterWidth/2)), 1e-9)
	assert.InDelta(t, 10, m.rate(at(6*meterWidth)), 1e-9)
}
