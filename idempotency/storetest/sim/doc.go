// Package sim is a deterministic simulation of the exactly-once protocol:
// it drives the real idempotency.Runner, the Reconciler and the consumer
// core (package consumer, fed by a simulated broker) against a store,
// through the events of the protocol's model:
//
//   - move A: actor A takes its next step (a claim, a step of the work, a
//     recovery point, a completion, an ack...); an idle actor starts its
//     next operation (an HTTP-like request, a consumer's Run of one
//     delivery, a Reconciler pass, an operator's RetryParked);
//   - crash A: A's process dies where it stands: its context ends and no
//     write of it reaches the store or the broker any more; the broker
//     delivers its unsettled delivery again (or drops it, if it was the
//     last one it allows); A restarts as a new process;
//   - stop A: a consumer is stopped gracefully (its Run's context ends);
//   - lose A: the store makes A's next write but A sees an error (the
//     reply was lost);
//   - fail A: A's next external call (the work's step) fails; with a
//     TxStore, a statement of A's next transaction fails transiently
//     and the work ignores it;
//   - tick: the clock moves a little; pause A: A stops until every lease
//     has run out (the clock moves past the lease), and the broker's ack
//     deadline of the delivery A holds passes, so the message is
//     delivered again while A still holds it.
//
// Only one actor runs at a time: each waits at its next step (a gate: a
// store call, a broker call, a wait, the work's effect) until the
// scheduler, a seeded random source, hands it the baton, so a seed
// replays the same events. The properties of the model are checked on
// the real outcome as it happens and at the end, after every actor ran
// to its end without faults, the broker was drained and a Reconciler ran
// with time moved past every lease:
//
//   - at most one completion per key and generation, and, with a
//     TxStore, the execution's local write committed with it (exactly one
//     for a completed record, none for another);
//   - a completed outcome never changes, and a replay returns it exactly;
//   - a fenced write of an execution whose lease was taken over never
//     commits;
//   - the broker's last delivery of a message is never given back, and
//     is acked or terminated only once the store has its outcome or owns
//     it (parked, or started with its message stored);
//   - at the end every message and every begun execution is completed or
//     parked.
//
// A store's test calls Run with a Harness; -seeds and -seed run more
// seeds or replay one (-events makes each longer), and a failure prints
// its seed and event trace. On a store whose time is a server's clock
// (moved by its TimeShift), a replay plays the same events, steps and
// outcomes; only the generation numbers the store gives differ.
//
// What it does not simulate: two store calls at the same time (each runs
// alone; the linearizability check covers overlapping calls), the
// consumer's keep-alives (a handler that runs past its lease is a
// pause), and a Reconciler resuming more than one execution at once.
package sim
