// Package storetest is the conformance suite for idempotency.Store
// implementations, in the spirit of testing/fstest.TestFS: every store must
// pass it.
//
// A store's test calls Run with a function that builds a Harness:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness {
//			mock := clock.NewMock()
//			return storetest.Harness{
//				Store:   idempotency.NewMemoryStore(mock),
//				Advance: mock.Add,
//			}
//		})
//	}
//
// The suite checks, each in a subtest with a fresh Harness:
//
//   - claims: a new key is created with Attempt 1, a non-zero Generation
//     and the given lease and TTL; a live key reports in progress, completed (with the outcome) or
//     mismatch (another fingerprint) and changes nothing; of many
//     goroutines claiming one key, or one stale lease, exactly one wins;
//   - takeover: after the lease the next claim with the same fingerprint
//     takes over with Attempt+1, the same Generation, a renewed lease, the
//     same ExpiresAt and the recovery point kept; another fingerprint never takes over; a completed
//     record never is; SaveRecoveryPoint renews the lease;
//   - fencing: a stale (or future, or unknown, or other-generation) Fence
//     gets ErrLeaseLost from SaveRecoveryPoint, Complete and Release and
//     writes nothing; an outcome is final (a second Complete, a late point or
//     a Release fail);
//   - generations: successive records of one key (after a Release, after
//     expiry) get distinct generations, and a fence of an earlier record,
//     from its first attempt or a takeover, never writes to a later one,
//     though the later one starts at Attempt 1 again;
//   - stalled executions: TakeOverStalled takes over exactly the live,
//     in-progress, unparked records that saved a recovery point and whose
//     lease ran out (Attempt+1, a new lease, Resume and recovery point
//     kept), oldest lease first, within its limit, each for one caller of
//     many at once; given a caller, only that caller's (counted against
//     the limit), leaving another's, even older, stalled and unchanged; Park is fenced, keeps its reason, hides the record from
//     TakeOverStalled and lets the next claim take it over at once; Resume
//     is kept until the record completes; ListParked lists exactly the live
//     parked records, by caller then key, page after page;
//   - a claim with a recovery point (a broker's last delivery) that finds
//     the record held, without one, by another execution's live lease
//     saves its point (and resume) on the record and leaves the execution
//     to its holder, whose fence still holds, whose lease extensions keep
//     the point, and who completes as before; when the holder fails
//     instead, ReleaseUnstarted keeps the record for TakeOverStalled;
//   - Release frees the key; Get returns ErrNotFound for a missing key;
//   - expiry: after the TTL a key is absent for Get and Claim before any
//     DeleteExpired; DeleteExpired removes only expired records and honours
//     its limit;
//   - tenant isolation: the same key under another caller is independent,
//     and (caller, key) pairs are not confused by concatenation;
//   - records are copies, in and out;
//   - any caller, key and recovery point is taken as it is: values far
//     longer than a database index entry (100 KiB), NUL bytes, invalid
//     UTF-8, and long values that differ only at their ends or split
//     differently between caller and key are never confused;
//   - under the package's own users: Runner.Do runs a key's work once
//     among many goroutines and replays it; a Reconciler resumes executions
//     stalled after a step (the step's result kept) and parks, lists and
//     retries one with no work registered; sweepers racing claims of the
//     same expired records leave every claim a fresh record; two instances
//     behind the Middleware run each key once, answer it one way, and (for
//     a TxStore) commit its local write;
//   - for a TxStore: Tx.Complete commits (with the local writes), a stale
//     fence (or one of an earlier record of the key) rolls everything back,
//     Rollback leaves the record owned; a transaction in which a statement
//     failed reports it (Tx.Err), takes no more statements (each fails), and
//     Complete then commits nothing, not even the writes made before the
//     failure, and fails with ErrTxFailed.
//
// RunLister checks a store that implements idempotency.Lister (every store
// of this module does): each state lists exactly its live records,
// filtered by caller and key prefix, page after page within the page's
// limit, past one page's scan window, and bad queries fail with
// ErrInvalidList.
//
// Two more checks live beside the suite. The linearizability check, in the
// module github.com/exactlyonce/retry/idempotency/storetest/linearize (so
// that its checker, porcupine, never reaches users of this module), runs
// concurrent calls with stale fences while the clock moves and checks the
// history against a sequential model of a record. RunChaos runs service
// instances on a store whose server is killed and restarted mid-run, and
// reports duplicates, keys stuck in progress and the requests that
// succeeded. RunFaults runs the fault matrix: every fault (a worker killed
// or paused past its lease, the store's connections dropped, a deadlock, a
// lock timeout, a serialization failure or a read-only refusal in the
// handler's transaction) at every point of an execution (before the claim,
// after it, mid-handler, after the effects before the outcome, after the
// outcome), each checked for every effect exactly once, nothing lost and
// no key stuck, and, for an idempotency.BatchStore, again with every claim
// and completion of the Runner sent through the store's batch operations;
// what only the store can do (drop its connections, make a statement of its
// transaction fail) it provides as Faults.
//
// The suite never sleeps: it moves time with Harness.Advance. It uses leases
// and TTLs of whole seconds and always advances at least one second past a
// deadline, so a store may treat the instant of expiry either way and may keep
// times at microsecond precision.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// Harness is one fresh store under test and the means to move its time.
type Harness struct {
	// Store is a new store that shares no records with any other Harness's
	// store, so subtests can neither see nor disturb each other. Clean it up
	// with t.Cleanup in the function that builds the Harness.
	Store idempotency.Store

	// Advance moves the store's notion of now forward by d, for every later
	// call on Store (for a database store, the time its queries see). The
	// suite never calls it concurrently with a store call. Required.
	Advance func(d time.Duration)

	// TxWrite and TxWritten are optional, used only when Store implements
	// idempotency.TxStore, to check that local writes commit and roll back
	// with the completion. TxWrite makes a local write named name through the
	// transaction that ctx carries (ctx comes from Tx.Context). TxWritten
	// reports whether a committed local write named name exists. Leave both
	// nil to check only the records.
	TxWrite   func(ctx context.Context, name string) error
	TxWritten func(t *testing.T, name string) bool

	// TxFail is optional, used only when Store implements
	// idempotency.TxStore: it makes a statement through the transaction ctx
	// carries that fails, and returns its error (non-nil). Leave it nil to
	// check only that a transaction without failures reports none.
	TxFail func(ctx context.Context) error
}

// Run runs the whole suite as subtests of t, building a fresh Harness for
// every subtest with newHarness.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if h.Store == nil || h.Advance == nil {
				t.Fatal("storetest: Harness needs Store and Advance")
			}
			tc.run(t, h)
		})
	}
}

// cases lists every check, in the order they run.
var cases = []struct {
	name string
	run  func(t *testing.T, h Harness)
}{
	{"ClaimCreates", testClaimCreates},
	{"ClaimWhileInProgress", testClaimWhileInProgress},
	{"ClaimRace", testClaimRace},
	{"CompleteThenReplay", testCompleteThenReplay},
	{"FingerprintMismatch", testFingerprintMismatch},
	{"MismatchNeverTakesOver", testMismatchNeverTakesOver},
	{"TakeoverAfterLease", testTakeoverAfterLease},
	{"TakeOverStalled", testTakeOverStalled},
	{"ClaimWithPoint", testClaimWithPoint},
	{"LastClaimKeepsMessage", testLastClaimKeepsMessage},
	{"TakeOverStalledLimit", testTakeOverStalledLimit},
	{"TakeOverStalledCaller", testTakeOverStalledCaller},
	{"TakeOverStalledRace", testTakeOverStalledRace},
	{"Park", testPark},
	{"ListParked", testListParked},
	{"TakeoverRace", testTakeoverRace},
	{"RecoveryPointExtendsLease", testRecoveryPointExtendsLease},
	{"CompletedIsNeverTakenOver", testCompletedIsNeverTakenOver},
	{"StaleFenceWritesNothing", testStaleFenceWritesNothing},
	{"WritesAfterCompleteFail", testWritesAfterCompleteFail},
	{"GenerationsDiffer", testGenerationsDiffer},
	{"ReleasedRecordFenceIsDead", testReleasedRecordFenceIsDead},
	{"ExpiredRecordFenceIsDead", testExpiredRecordFenceIsDead},
	{"ReleaseFreesKey", testReleaseFreesKey},
	{"GetNotFound", testGetNotFound},
	{"Expiry", testExpiry},
	{"DeleteExpired", testDeleteExpired},
	{"DeleteExpiredLimit", testDeleteExpiredLimit},
	{"TenantIsolation", testTenantIsolation},
	{"RecordsAreCopies", testRecordsAreCopies},
	{"LongCallerAndKey", testLongCallerAndKey},
	{"OddRecoveryPoints", testOddRecoveryPoints},
	{"RunnerRunsOnce", testRunnerRunsOnce},
	{"Reconciler", testReconciler},
	{"SweepersRaceClaims", testSweepersRaceClaims},
	{"MiddlewareRunsEachKeyOnce", testMiddlewareRunsEachKeyOnce},
	{"TxCompleteCommits", testTxCompleteCommits},
	{"TxLostLeaseRollsBack", testTxLostLeaseRollsBack},
	{"TxEarlierGenerationRollsBack", testTxEarlierGenerationRollsBack},
	{"TxRollback", testTxRollback},
	{"TxFailedStatementRollsBack", testTxFailedStatementRollsBack},
	{"BatchClaim", testBatchClaim},
	{"BatchClaimRace", testBatchClaimRace},
	{"BatchCommit", testBatchCommit},
	{"BatchLostLease", testBatchLostLease},
	{"BatchOneRecordTwice", testBatchOneRecordTwice},
	{"BatchCompletedAgain", testBatchCompletedAgain},
	{"BatchClose", testBatchClose},
	{"BatchFailedStatement", testBatchFailedStatement},
	{"BatchLastClaimMarks", testBatchLastClaimMarks},
	{"BatchRunnerCommitsUntouched", testBatchRunnerCommitsUntouched},
}
