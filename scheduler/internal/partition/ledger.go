package partition

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Ledger is when a record's outcome counts: the seam between a partition's
// engine (task, worker, release order) and whatever remembers which records
// are finished. The pipeline's wiring (Pipeline.wire) picks one by consume
// mode and guarantee, once:
//
//   - offsetLedger (consume: group, at_least_once): a record is done in its
//     partition's offset tracker, from which the watermark is committed.
//   - txnLedger (exactly_once): the same tracker, but every ordering keeps
//     a release order with places reserved at enqueue, and a dropped record
//     keeps its place, so a transaction's commit covers exactly the records
//     whose outcomes it carries.
//   - shareLedger (consume: share): a record is done when the broker is
//     told ACCEPT; a record the host gives up is RELEASEd at once.
//
// The task calls it as a record finishes (markDone) or is dropped
// (abandoned); a new task asks it for its release order. It never calls
// back into the task except to forget a share record's bytes.
// (DESIGN.md, "Seams: source, ledger, sink, committer".)
type Ledger interface {
	// releaseOrder is the release order a new task keeps (nil: none).
	releaseOrder(t *Task) *releaser
	// markDone is told that r's outcome is durable (task.finish) and
	// reports whether r was still undecided: a record is finished once.
	markDone(t *Task, r *kgo.Record) bool
	// abandoned is told that r was given up without an outcome
	// (task.drop).
	abandoned(t *Task, r *kgo.Record)
	// RecordsDoneOffsets reports whether done offsets above the watermark
	// are committed in the metadata (and read back by the next owner).
	RecordsDoneOffsets() bool
	// dropKeepsPlace reports whether a dropped record keeps its place in the
	// release order unsettled, holding back every record after it.
	dropKeepsPlace() bool
	// countsAtCommit reports whether records' outcomes are counted when
	// the transaction they are in commits (Task.CountCommitted) rather than
	// when they are done: a done record of an aborted transaction is
	// processed again.
	countsAtCommit() bool
}

// OffsetLedger is the at_least_once ledger: the partition's offset tracker
// (RATIONALE.md, "Committing: the watermark", "Done offsets in commit
// metadata").
type OffsetLedger struct {
	// Ordered: ordering partition, whose outcomes leave in offset order
	// through a release order feeding sk.
	Ordered bool
	Sink    Sink
	// DoneOffsets is kafka.record_done_offsets.
	DoneOffsets bool
}

func (l OffsetLedger) releaseOrder(*Task) *releaser {
	if l.Ordered {
		return &releaser{sk: l.Sink}
	}
	return nil
}

// markDone marks r's offset done in its partition's tracker: from there it
// reaches the commit watermark.
func (OffsetLedger) markDone(t *Task, r *kgo.Record) bool { return t.Tracker.Done(r.Offset) }

// abandoned leaves r uncommitted: the partition's next owner processes it.
func (OffsetLedger) abandoned(*Task, *kgo.Record) {}
func (l OffsetLedger) RecordsDoneOffsets() bool   { return l.DoneOffsets }
func (OffsetLedger) dropKeepsPlace() bool         { return false }
func (OffsetLedger) countsAtCommit() bool         { return false }

// TxnLedger is the exactly_once ledger (scheduler/internal/commit/txn.go): the offset tracker, whose
// watermark the next cut commits inside the transaction.
type TxnLedger struct{ Sink Sink }

// releaseOrder: every ordering keeps one under exactly_once, with places
// reserved in offset order as records arrive, so that outcomes enter a
// transaction in offset order and a commit covers exactly the records whose
// outputs it carries.
func (l TxnLedger) releaseOrder(*Task) *releaser {
	return &releaser{sk: l.Sink, byOffset: true}
}

// markDone marks r's offset done; the next cut commits the watermark in
// the transaction.
func (TxnLedger) markDone(t *Task, r *kgo.Record) bool { return t.Tracker.Done(r.Offset) }

// abandoned: r keeps its place unsettled (dropKeepsPlace) and stays
// uncommitted.
func (TxnLedger) abandoned(*Task, *kgo.Record) {}
func (TxnLedger) RecordsDoneOffsets() bool     { return false }
func (TxnLedger) dropKeepsPlace() bool         { return true }
func (TxnLedger) countsAtCommit() bool         { return true }

// ShareLedger is the consume: share ledger (scheduler/internal/source/share.go): each record's
// acknowledgement to the broker, through the locks the poll loop holds.
type ShareLedger struct {
	Locks *ShareLocks
	Log   *slog.Logger
}

// releaseOrder: a share pool's records have no order to keep.
func (ShareLedger) releaseOrder(*Task) *releaser { return nil }
func (ShareLedger) RecordsDoneOffsets() bool     { return false }
func (ShareLedger) dropKeepsPlace() bool         { return false }
func (ShareLedger) countsAtCommit() bool         { return false }

// markDone accepts r: its outcome is durable. False when r is no longer
// held (released at shutdown, or accepted already).
func (l ShareLedger) markDone(_ *Task, r *kgo.Record) bool {
	lapsed, ok := l.Locks.Take(r)
	if !ok {
		return false
	}
	r.Ack(kgo.AckAccept)
	l.Locks.Stats.Accepted.Add(1)
	if lapsed {
		l.Log.Warn("record accepted after its lock lapsed: another host may have processed it too", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	}
	return true
}

// abandoned releases r at once, so another host takes it without waiting
// for its lock to lapse, and gives back what it counted in the task.
func (l ShareLedger) abandoned(t *Task, r *kgo.Record) {
	if _, ok := l.Locks.Take(r); !ok {
		return
	}
	r.Ack(kgo.AckRelease)
	l.Locks.Stats.Released.Add(1)
	t.forgetShared(r)
}
