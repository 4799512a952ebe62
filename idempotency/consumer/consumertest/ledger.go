package consumertest

import "sync"

// downstream is the service a handler's effect calls, with the step's
// downstream key, which it deduplicates by, as Step prescribes: a process
// frozen or killed while a step's call is in flight (a pause or a kill
// strikes the whole process, the other messages' steps too) has that
// step called again by whoever resumes it. It counts the effects per
// message.
type downstream struct {
	mu      sync.Mutex
	done    map[string]bool // downstream keys
	effects map[string]int  // per message key
}

func newDownstream() *downstream {
	return &downstream{done: map[string]bool{}, effects: map[string]int{}}
}

func (d *downstream) call(msgKey, downstreamKey string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.done[downstreamKey] {
		d.done[downstreamKey] = true
		d.effects[msgKey]++
	}
}

func (d *downstream) count(msgKey string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.effects[msgKey]
}
