package bench

import (
	"context"
	"sync/atomic"
	"time"
)

// capacityPool is the work of a server of a few workers and a bounded
// queue (OverloadConfig), or a queue without bound, whatever protocol it
// answers: a request is admitted while the queue has room (always, without
// a bound), waits for a worker and holds it for the service time, and its
// work is not cut short when its caller leaves.
// The HTTP and the gRPC finite-capacity servers share it.
type capacityPool struct {
	cfg     OverloadConfig
	start   time.Time
	slots   chan struct{} // a token per request admitted (queued or served)
	workers chan struct{} // a token per busy worker
	// attempts counts arrivals per bucket, arrived all of them.
	attempts                []atomic.Int64
	arrived, served, wasted atomic.Int64
}

func newCapacityPool(cfg OverloadConfig, buckets int) *capacityPool {
	return &capacityPool{
		cfg:      cfg,
		slots:    make(chan struct{}, max(cfg.Workers+cfg.Queue, 0)),
		workers:  make(chan struct{}, cfg.Workers),
		attempts: make([]atomic.Int64, buckets),
	}
}

// serviceTime is how long a request that starts at since takes.
func (p *capacityPool) serviceTime(since time.Duration) time.Duration {
	if since >= p.cfg.TriggerAt && since < p.cfg.triggerEnd() {
		return p.cfg.ServiceTime * time.Duration(p.cfg.Slowdown)
	}
	return p.cfg.ServiceTime
}

// serve counts the arrival of a request whose caller waits as long as ctx
// lives and does its work: false if the queue was full (the request is
// refused at once), or, for a server that queues without bound, if it
// waited longer than MaxQueueWait for a worker (it is answered without
// work); else it waits for a worker, works the service time whether or not
// its caller is still there, and counts the work as wasted if the caller
// left meanwhile.
func (p *capacityPool) serve(ctx context.Context) bool {
	p.arrived.Add(1)
	arrived := time.Now()
	if i := int(arrived.Sub(p.start) / p.cfg.Bucket); i >= 0 && i < len(p.attempts) {
		p.attempts[i].Add(1)
	}
	if !p.cfg.Unbounded {
		select {
		case p.slots <- struct{}{}:
		default:
			return false
		}
		defer func() { <-p.slots }()
	}
	p.workers <- struct{}{} // blocked senders are served in order of arrival
	if p.cfg.Unbounded && p.cfg.MaxQueueWait > 0 && time.Since(arrived) > p.cfg.MaxQueueWait {
		<-p.workers
		return false
	}
	time.Sleep(p.serviceTime(time.Since(p.start)))
	<-p.workers
	p.served.Add(1)
	if ctx.Err() != nil {
		p.wasted.Add(1)
	}
	return true
}

// result gathers what the run measured: the requests offered and
// succeeded per bucket, and the pool's arrivals and work.
func (p *capacityPool) result(offered, succeeded []int) OverloadResult {
	cfg := p.cfg
	res := OverloadResult{
		Bucket: cfg.Bucket, TriggerAt: cfg.TriggerAt, TriggerEnd: cfg.triggerEnd(), Offer: cfg.Offer,
		Offered: offered, Succeeded: succeeded, Attempts: make([]int, len(offered)),
	}
	for i := range res.Attempts {
		res.Attempts[i] = int(p.attempts[i].Load())
	}
	res.Arrived, res.Served, res.Wasted = int(p.arrived.Load()), int(p.served.Load()), int(p.wasted.Load())
	return res
}
