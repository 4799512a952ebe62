// Package linearize checks that an idempotency.Store is linearizable: that
// every history of concurrent calls on it can be ordered, each call at an
// instant between its start and its return, so that a sequential model of
// one record gives every result the store gave.
//
// It is a module of its own so that the checker it uses,
// github.com/anishathalye/porcupine, never reaches users of the root module:
// storetest (in the root module) has the conformance cases, this module the
// linearizability case, and every store's tests run both:
//
//	func TestLinearizable(t *testing.T) {
//		linearize.Run(t, func(t *testing.T) storetest.Harness { ... })
//	}
//
// Run takes the same Harness as storetest.Run. Many clients call the store
// at once on a few keys: claims (with two fingerprints, with and without a
// stored request), recovery points, completions, releases and parks with the
// fences they got (fresh, long stale, or forged), reads, takeovers of
// stalled executions, lists of parked ones and sweeps; on a store that is an
// idempotency.BatchStore, also batches of claims (ClaimBatch, a key
// sometimes twice in one) and of completions (BeginBatch, Begin, Complete,
// Commit, with fences fresh, stale or forged, two of one key in a batch at
// times), among the single calls on the same keys. A batch promises no
// atomicity across its members: each member is checked as a call of its own
// on its key, placed anywhere between the batch's start and its return, with
// the result the batch gave it. The clock moves between epochs of calls,
// past leases and TTLs, while some clients sit out whole epochs holding
// their fences, as paused owners do. Every call and its result is recorded
// and the history checked, key by key, against the model: claims that
// create, take over or report exactly as the record stands; fenced writes
// that apply exactly while their fence holds; a generation never given twice
// to a key; takeovers of stalled executions only when they are stalled;
// parked records listed exactly while they are parked; times from the
// store's clock.
//
// A history that is not linearizable fails the test and is written out for
// a person to read: history.txt (for each key that fails, the longest order
// of its calls the model accepts, with the record after each, then all its
// calls) and history.html (porcupine's visualization), in Config.Dir or a
// new directory under the system's temporary directory, named in the
// failure.
package linearize
