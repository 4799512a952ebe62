package retry

// Stats returns what the dependency has seen so far.
func (d *dependency) Stats() DependencyStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stats
	st.State = [...]string{"up", "down", "recovering"}[d.state.Load()]
	st.Waiting = d.waiting()
	return st
}

// DependencyStats is what a Transport knows of one host (or a Budget of
// its dependency), for monitoring (see RideThrough). The counters only grow
// (a Transport forgets the counters of a host it evicted as idle).
type DependencyStats struct {
	// Name is the host (for a Transport); empty for a Budget.
	Name string
	// State is "up", "down" or "recovering".
	State string
	// Waiting is the number of requests waiting now.
	Waiting int
	// Outages counts the times the dependency was taken as down.
	Outages uint64
	// Overloads counts the times it was taken as overloaded: up, but
	// answering slower than it did when healthy (see RideThrough).
	Overloads uint64
	// Waited counts the requests that waited (each once, however often it
	// waited); Released, the waits ended by a release after a
	// recovery; Probes, the probes sent.
	Waited, Released, Probes uint64
	// Expired counts waits ended by the request's deadline or MaxWait;
	// Abandoned, waits whose context was cancelled; Rejected, requests
	// that found MaxWaiters waiting and failed at once; FailedFast,
	// requests that failed at once because the dependency had been down
	// for longer than their MaxWait.
	Expired, Abandoned, Rejected, FailedFast uint64
}
