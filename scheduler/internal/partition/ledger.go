package partition

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
)

// Ledger is when a record's outcome counts: the seam between a partition's
// engine (task, worker, release order) and whatever remembers which records
// are finished. It owns a record's life from the engine's side — tracked as
// it enters a task (Policy.Tracks), done once its outcome is durable (Done),
// or abandoned without one (Abandon) — and is given what it needs of the
// partition (its offset tracker), never the task: a ledger lives outside
// this package (scheduler/internal/ledger) and a test fakes it. The
// pipeline's wiring (Pipeline.wire) picks one by consume mode and
// guarantee, once:
//
//   - ledger.Offsets (consume: group, at_least_once): a record is done in
//     its partition's offset tracker, from which the watermark is committed.
//   - ledger.Txn (exactly_once): the same tracker, but every ordering keeps
//     a release order with places reserved at enqueue, and a dropped record
//     keeps its place, so a transaction's commit covers exactly the records
//     whose outcomes it carries.
//   - ledger.Share (consume: share): a record is done when the broker is
//     told ACCEPT; a record the host gives up is RELEASEd at once.
//
// Done and Abandon are called from any goroutine (workers, produce
// callbacks, the background), with no lock of the engine held; they must
// not block, and never call into the task. Policy is asked once per task
// and once per enqueued batch. (DESIGN.md, "Seams: source, ledger, sink,
// committer".)
type Ledger interface {
	// Policy is how the engine keeps the ledger's records.
	Policy() LedgerPolicy
	// Done is told that r's outcome is durable (Task.Finish); tr is its
	// partition's offset tracker. It reports whether r was still
	// undecided: a record is finished once.
	Done(tr *offsets.Tracker, r *kgo.Record) bool
	// Abandon is told that r was given up without an outcome (task.drop).
	// forget: r leaves the task now (it no longer counts in flight), as a
	// share record given back to the broker; otherwise it stays counted
	// until the task closes, uncommitted.
	Abandon(r *kgo.Record) (forget bool)
}

// LedgerPolicy is what a ledger decides of its records' life in the
// engine, read when a task is made (and Tracks when a batch is enqueued):
// plain values, so that the record path asks the ledger nothing per record
// but Done.
type LedgerPolicy struct {
	// Order is the release order a new task keeps.
	Order ReleaseOrder
	// Tracks: records enter their partition's offset tracker as they are
	// enqueued (and records a previous owner reported done are skipped).
	// A share group's records have no watermark.
	Tracks bool
	// DropKeepsPlace: a dropped record keeps its place in the release
	// order unsettled, holding back every record after it.
	DropKeepsPlace bool
	// CountsAtCommit: records' outcomes are counted when the transaction
	// they are in commits (Task.CountCommitted) rather than when they are
	// done: a done record of an aborted transaction is processed again.
	CountsAtCommit bool
	// DoneOffsets: done offsets above the watermark are committed in the
	// metadata (and read back by the next owner).
	DoneOffsets bool
}

// ReleaseOrder is the order in which a task's decided outcomes reach its
// sink.
type ReleaseOrder uint8

const (
	// ReleaseAny: none kept; each outcome goes to the sink as it is decided.
	ReleaseAny ReleaseOrder = iota
	// ReleaseInOrder: offset order, each record taking its place as it
	// settles (ordering partition: one record at a time).
	ReleaseInOrder
	// ReleaseByOffset: offset order under every ordering, places reserved
	// as records are enqueued (exactly_once).
	ReleaseByOffset
)

// releaser is the release order p asks of a task delivering to sk (nil:
// none).
func (p LedgerPolicy) releaser(sk Sink) *releaser {
	switch p.Order {
	case ReleaseInOrder:
		return &releaser{sk: sk}
	case ReleaseByOffset:
		return &releaser{sk: sk, byOffset: true}
	}
	return nil
}
