package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// The fault matrix: RunFaults drives Runner.Do (and a Reconciler where a
// worker dies) through every fault at every point of an execution, and
// checks that each effect happened exactly once, nothing was lost and no
// key was left stuck.

// Fault is something that goes wrong during an execution.
type Fault int

const (
	// FaultKilled: the process running the execution dies (SIGKILL): it
	// never runs another statement, and its connections close (Faults.Drop,
	// when the store has connections). Modelled in-process: the worker
	// stops at the point and never stores anything of its own again; a
	// Reconciler and the client's retry finish the key.
	FaultKilled Fault = iota
	// FaultPaused: the process stops (SIGSTOP) past its lease, another
	// takes the key over and finishes it, then the first wakes and goes on
	// as if nothing happened: the store must fence out everything it
	// writes.
	FaultPaused
	// FaultDropped: every connection the store holds is closed by the
	// server (Faults.Drop), the transaction's included; the execution goes
	// on.
	FaultDropped
	// FaultDeadlock: a statement of the execution's transaction is chosen
	// as a deadlock's victim (MySQL 1213, PostgreSQL 40P01).
	FaultDeadlock
	// FaultLockTimeout: a statement of the transaction waits too long for a
	// lock (MySQL 1205, PostgreSQL 55P03).
	FaultLockTimeout
	// FaultSerialization: a statement of the transaction fails to
	// serialize with a concurrent one (MySQL 1020, PostgreSQL 40001).
	FaultSerialization
	// FaultReadOnly: a write of the transaction is refused as read-only (a
	// failover: MySQL 1290 or 1792, PostgreSQL 25006).
	FaultReadOnly
)

// faults lists every Fault, in the order of the matrix's rows.
var faults = []Fault{FaultKilled, FaultPaused, FaultDropped, FaultDeadlock, FaultLockTimeout, FaultSerialization, FaultReadOnly}

// String names the fault as the matrix does.
func (f Fault) String() string {
	switch f {
	case FaultKilled:
		return "process killed"
	case FaultPaused:
		return "paused past its lease"
	case FaultDropped:
		return "connections dropped"
	case FaultDeadlock:
		return "deadlock"
	case FaultLockTimeout:
		return "lock timeout"
	case FaultSerialization:
		return "serialization failure"
	case FaultReadOnly:
		return "read only"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// inTx reports whether the fault is a database error of a statement of the
// execution's transaction (Faults.Tx makes it).
func (f Fault) inTx() bool { return f >= FaultDeadlock }

// Point is where in an execution a fault happens.
type Point int

const (
	// BeforeClaim: before the request reaches the store.
	BeforeClaim Point = iota
	// AfterClaim: the key is claimed, nothing of the work has run.
	AfterClaim
	// MidHandler: the work's external effect (a Step) is done and its
	// result saved, the first of its two local writes (in the store's
	// transaction) too; the second is next.
	MidHandler
	// BeforeOutcome: every effect is done (the local writes too); the
	// outcome is not stored yet.
	BeforeOutcome
	// AfterOutcome: the outcome is stored; the client has not had it.
	AfterOutcome
)

// points lists every Point, in the order of the matrix's columns.
var points = []Point{BeforeClaim, AfterClaim, MidHandler, BeforeOutcome, AfterOutcome}

// String names the point as the matrix does.
func (p Point) String() string {
	switch p {
	case BeforeClaim:
		return "before claim"
	case AfterClaim:
		return "after claim"
	case MidHandler:
		return "mid-handler"
	case BeforeOutcome:
		return "effect done, outcome not stored"
	case AfterOutcome:
		return "outcome stored, not answered"
	}
	return fmt.Sprintf("Point(%d)", int(p))
}

// applies reports whether fault can happen at p at all. A pause before the
// claim or after the outcome only delays; a statement of the transaction
// fails only while the work runs.
func applies(fault Fault, p Point) bool {
	switch {
	case fault == FaultPaused:
		return p != BeforeClaim && p != AfterOutcome
	case fault.inTx():
		return p == MidHandler || p == BeforeOutcome
	}
	return true
}

// ErrNotInjected is what Faults.Tx returns for a fault the store cannot
// cause: its cells are reported as not run.
var ErrNotInjected = errors.New("storetest: the store cannot cause this fault")

// Faults is what only the store under test can do to itself, for
// RunFaults, made with each Harness for its store. Both hooks may run on a goroutine other than the test's: they
// report their own failures with t.Error, never t.Fatal.
type Faults struct {
	// Drop closes, from the server's side, every connection of the
	// Harness's store, as a network failure or a server's restart would:
	// those idle in its pool, and the one of the store's transaction that
	// ctx carries, if it has begun (ctx is the execution's context at the
	// fault's point, or context.Background() outside the work). The store
	// must open new ones for later calls. Leave it nil for a store without
	// connections: the "connections dropped" row is not run.
	Drop func(ctx context.Context, t *testing.T)

	// Tx makes a statement through the transaction that ctx carries fail
	// with the database's own error for fault (one of the faults that are
	// database errors: FaultDeadlock, FaultLockTimeout, FaultSerialization,
	// FaultReadOnly), as the server gives it, with whatever the server then
	// does to the transaction, and returns that statement's error. It
	// returns ErrNotInjected for a fault it cannot cause. Used only for a
	// TxStore with Harness.TxWrite and TxWritten; leave it nil otherwise.
	Tx func(ctx context.Context, t *testing.T, fault Fault) error
}

// Cell is the result of one fault at one point.
type Cell string

const (
	// CellPassed: each effect happened once, nothing was lost, no key was
	// left stuck.
	CellPassed Cell = "pass"
	// CellFailed: the cell's checks failed (the test failed with them).
	CellFailed Cell = "FAIL"
	// CellNotApplicable: the fault cannot happen at that point.
	CellNotApplicable Cell = "n/a"
	// CellNotRun: the store cannot cause the fault (no hook for it).
	CellNotRun Cell = "not run"
)

// FaultMatrix is the result of RunFaults: a Cell for every fault and point.
type FaultMatrix map[Fault]map[Point]Cell

// String renders the matrix as a Markdown table, a row per fault and a
// column per point.
func (m FaultMatrix) String() string {
	var b strings.Builder
	b.WriteString("| fault, at each point: |")
	for _, p := range points {
		b.WriteString(" " + p.String() + " |")
	}
	b.WriteString("\n|---|")
	for range points {
		b.WriteString("---|")
	}
	for _, f := range faults {
		b.WriteString("\n| " + f.String() + " |")
		for _, p := range points {
			b.WriteString(" " + string(m[f][p]) + " |")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// RunFaults runs the fault matrix on the store: for every fault and every
// point where it can happen, a subtest named "fault/point" with a fresh
// Harness runs one keyed request through Runner.Do, whose work charges a
// fake provider in a Step (the provider deduplicates by the step's
// downstream key, as a real one does) and, for a TxStore with
// Harness.TxWrite, makes two local writes in the store's transaction (not
// looking at their errors, as a careless handler would). The fault
// strikes the first run at its point; the client's retries (and, after a
// kill, a Reconciler) then carry the key to its outcome. Each cell checks
// that the key is completed and replays one outcome, that the provider was
// charged once and never called after the step's result was saved, and that
// the local writes of exactly one run committed, both of them. After a
// kill or a pause, the first run is then let go on (a paused one wakes and
// carries on; a killed one ends) and the checks run again: nothing it does
// may change the outcome.
//
// When the store is an idempotency.BatchStore, RunFaults runs the matrix
// a second time, as subtests named "batched/fault/point", with the
// Runner's group commit sending every claim through ClaimBatch and every
// completion through a batch (BeginBatch, Begin, Complete, Commit), as
// those of concurrent executions go, though the request goes alone. A
// local write takes an execution's completion out of the batch (it
// commits its own transaction), so in these cells the work writes
// locally only when the fault is one of its transaction's.
//
// newHarness builds a fresh Harness for each cell, and the Faults that act
// on its store. The faults that are database errors run only for a TxStore
// with TxWrite, TxWritten and Faults.Tx; the dropped connections only with
// Faults.Drop. RunFaults logs the matrix (both, for a BatchStore) and
// returns it; for a BatchStore, each cell holds the worse of its two
// results.
func RunFaults(t *testing.T, newHarness func(t *testing.T) (Harness, Faults)) FaultMatrix {
	t.Helper()
	// A first Harness tells which faults the store can cause, and whether
	// it batches; the cells it cannot run are not started.
	probe, probeFaults := newHarness(t)
	m := runMatrix(t, newHarness, probe, probeFaults, false)
	t.Logf("fault matrix:\n%s", m)
	if _, ok := probe.Store.(idempotency.BatchStore); !ok {
		return m
	}
	var batched FaultMatrix
	t.Run("batched", func(t *testing.T) {
		batched = runMatrix(t, newHarness, probe, probeFaults, true)
		t.Logf("fault matrix, every claim and completion batched:\n%s", batched)
	})
	return m.worse(batched)
}

// runMatrix runs every cell of the matrix that the store can run, batched
// or not, as subtests of t.
func runMatrix(t *testing.T, newHarness func(t *testing.T) (Harness, Faults), probe Harness, probeFaults Faults, batched bool) FaultMatrix {
	m := FaultMatrix{}
	for _, fault := range faults {
		m[fault] = map[Point]Cell{}
		for _, p := range points {
			switch {
			case !applies(fault, p):
				m[fault][p] = CellNotApplicable
				continue
			case !canRun(probe, probeFaults, fault):
				m[fault][p] = CellNotRun
				continue
			}
			m[fault][p] = CellFailed
			t.Run(cellName(fault, p), func(t *testing.T) {
				h, f := newHarness(t)
				if h.Store == nil || h.Advance == nil {
					t.Fatal("storetest: Harness needs Store and Advance")
				}
				defer func() {
					if t.Skipped() { // Faults.Tx returned ErrNotInjected
						m[fault][p] = CellNotRun
					}
				}()
				if runCell(t, h, f, fault, p, batched) {
					m[fault][p] = CellPassed
				}
			})
		}
	}
	return m
}

// worse returns, for each cell, the worse of its results in m and o: a
// failure, else a cell not run, else a pass. A nil o leaves m as it is.
func (m FaultMatrix) worse(o FaultMatrix) FaultMatrix {
	if o == nil {
		return m
	}
	rank := map[Cell]int{CellNotApplicable: 0, CellPassed: 1, CellNotRun: 2, CellFailed: 3}
	w := FaultMatrix{}
	for _, f := range faults {
		w[f] = map[Point]Cell{}
		for _, p := range points {
			a, b := m[f][p], o[f][p]
			if rank[b] > rank[a] {
				a = b
			}
			w[f][p] = a
		}
	}
	return w
}

// cellName is the subtest's name of a cell: "deadlock/mid-handler".
func cellName(f Fault, p Point) string {
	name := func(s string) string {
		s, _, _ = strings.Cut(s, ",")
		return strings.ReplaceAll(s, " ", "-")
	}
	return name(f.String()) + "/" + name(p.String())
}

// canRun reports whether the store has what fault needs.
func canRun(h Harness, f Faults, fault Fault) bool {
	switch {
	case fault == FaultDropped:
		return f.Drop != nil
	case fault.inTx():
		return isTxStore(h) && h.TxWrite != nil && h.TxWritten != nil && f.Tx != nil
	}
	return true
}
