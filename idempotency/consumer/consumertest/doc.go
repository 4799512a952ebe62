// Package consumertest is the fault matrix every broker adapter of
// package consumer must pass: for each fault (the consumer's process
// killed, paused past its lease, its connection to the broker dropped,
// the store failing, a graceful stop) at each point of a message's
// handling (before the claim, after the claim, mid-handler, after the
// effect before the outcome, after the outcome before the ack), on an
// ordinary delivery, on the one that reaches the consumer's MaxDeliveries
// (the broker without a limit, as the quick start sets it up) and on the
// broker's last one (a broker with a limit), each message's effect
// happens exactly once and none is lost or left in progress; so too for
// a message published twice, and for a consumer stopped during an outage
// while it holds the broker's last deliveries (handed to the store, then
// run once by the next consumer's Reconciler).
//
// An adapter's test supplies a Broker (a queue of the test's own, a
// consumer on a connection of its own, a way to drop that connection)
// and calls Run:
//
//	func TestFaultMatrix(t *testing.T) { consumertest.Run(t, broker{}) }
//
// Faults are injected in process: a store wrapper and the kit's handler
// stop the consumer at the point; "killed" drops its connection and fails
// all it does from then on, as a dead process does nothing more; "paused"
// freezes it until its lease has run out, then lets it go on. Effects are
// a Step's call to a downstream that deduplicates by the step's key, as
// the idempotency package prescribes for effects outside the store.
//
// One cell is not in the matrix: a kill before the claim of the broker's
// last delivery on a broker with a limit, when nothing reached the store
// and the broker drops or dead-letters the message: the reason to give a
// broker no limit. A kill right after that claim is: the claim
// stores the message with the started mark in one store operation
// (idempotency.Request.StartedAtClaim), so a Reconciler finishes it.
package consumertest
