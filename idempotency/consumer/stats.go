package consumer

import "sync/atomic"

// Stats counts what a Consumer did with its deliveries. The counts only grow.
type Stats struct {
	// Executed counts the messages whose handler ran and whose outcome was
	// stored, then acked.
	Executed uint64
	// Duplicates counts the deliveries of messages that had completed
	// before: acked without running.
	Duplicates uint64
	// InProgress counts the deliveries given back because another
	// execution held the key.
	InProgress uint64
	// Retried counts the deliveries given back after the handler failed
	// transiently.
	Retried uint64
	// Held counts the times a delivery was held instead of given back:
	// through an outage or a store failure, or on its last delivery.
	Held uint64
	// Parked counts the messages parked for a reason (see the package
	// documentation), then terminated: they wait for RetryParked.
	Parked uint64
	// HandedOver counts the broker's last deliveries that a stopping
	// consumer held unhandled and handed to the store (claimed with the
	// message, marked started), then acked: a Reconciler finishes them.
	HandedOver uint64
	// Terminated counts the messages terminated (dead-lettered), the
	// parked ones included.
	Terminated uint64
	// Outages counts the times the consumer saw a dependency go down and
	// paused fetching.
	Outages uint64
	// Reconnects counts the times the consumer's broker adapter restored
	// its subscription after its connection or channel was lost (see the
	// adapters' documentation); the core itself leaves it at 0.
	Reconnects uint64
}

type counters struct {
	executed, duplicates, inProgress, retried, held, parked, handedOver, terminated, outages atomic.Uint64
}

// Stats returns the consumer's counts.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	return Stats{
		Executed: s.executed.Load(), Duplicates: s.duplicates.Load(), InProgress: s.inProgress.Load(),
		Retried: s.retried.Load(), Held: s.held.Load(), Parked: s.parked.Load(), HandedOver: s.handedOver.Load(),
		Terminated: s.terminated.Load(), Outages: s.outages.Load(),
	}
}
