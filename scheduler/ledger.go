package scheduler

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ledger is when a record's outcome counts: the seam between a partition's
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
type ledger interface {
	// releaseOrder is the release order a new task keeps (nil: none).
	releaseOrder(t *task) *releaser
	// markDone is told that r's outcome is durable (task.finish) and
	// reports whether r was still undecided: a record is finished once.
	markDone(t *task, r *kgo.Record) bool
	// abandoned is told that r was given up without an outcome
	// (task.drop).
	abandoned(t *task, r *kgo.Record)
	// recordsDoneOffsets reports whether done offsets above the watermark
	// are committed in the metadata (and read back by the next owner).
	recordsDoneOffsets() bool
	// dropKeepsPlace reports whether a dropped record keeps its place in the
	// release order unsettled, holding back every record after it.
	dropKeepsPlace() bool
}

// offsetLedger is the at_least_once ledger: the partition's offset tracker
// (RATIONALE.md, "Committing: the watermark", "Done offsets in commit
// metadata").
type offsetLedger struct {
	// ordered: ordering partition, whose outcomes leave in offset order
	// through a release order feeding sk.
	ordered bool
	sk      sink
	// doneOffsets is kafka.record_done_offsets.
	doneOffsets bool
}

func (l offsetLedger) releaseOrder(*task) *releaser {
	if l.ordered {
		return &releaser{sk: l.sk}
	}
	return nil
}

// markDone marks r's offset done in its partition's tracker: from there it
// reaches the commit watermark.
func (offsetLedger) markDone(t *task, r *kgo.Record) bool { return t.tr.Done(r.Offset) }

// abandoned leaves r uncommitted: the partition's next owner processes it.
func (offsetLedger) abandoned(*task, *kgo.Record) {}
func (l offsetLedger) recordsDoneOffsets() bool   { return l.doneOffsets }
func (offsetLedger) dropKeepsPlace() bool         { return false }

// txnLedger is the exactly_once ledger (txn.go): the offset tracker, whose
// watermark the next cut commits inside the transaction.
type txnLedger struct{ sk sink }

// releaseOrder: every ordering keeps one under exactly_once, with places
// reserved in offset order as records arrive, so that outcomes enter a
// transaction in offset order and a commit covers exactly the records whose
// outputs it carries.
func (l txnLedger) releaseOrder(*task) *releaser {
	return &releaser{sk: l.sk, byOffset: true}
}

// markDone marks r's offset done; the next cut commits the watermark in
// the transaction.
func (txnLedger) markDone(t *task, r *kgo.Record) bool { return t.tr.Done(r.Offset) }

// abandoned: r keeps its place unsettled (dropKeepsPlace) and stays
// uncommitted.
func (txnLedger) abandoned(*task, *kgo.Record) {}
func (txnLedger) recordsDoneOffsets() bool     { return false }
func (txnLedger) dropKeepsPlace() bool         { return true }

// shareLedger is the consume: share ledger (share.go): each record's
// acknowledgement to the broker, through the locks the poll loop holds.
type shareLedger struct {
	locks *shareLocks
	log   *slog.Logger
}

// releaseOrder: a share pool's records have no order to keep.
func (shareLedger) releaseOrder(*task) *releaser { return nil }
func (shareLedger) recordsDoneOffsets() bool     { return false }
func (shareLedger) dropKeepsPlace() bool         { return false }

// markDone accepts r: its outcome is durable. False when r is no longer
// held (released at shutdown, or accepted already).
func (l shareLedger) markDone(_ *task, r *kgo.Record) bool {
	lapsed, ok := l.locks.take(r)
	if !ok {
		return false
	}
	r.Ack(kgo.AckAccept)
	l.locks.stats.Accepted.Add(1)
	if lapsed {
		l.log.Warn("record accepted after its lock lapsed: another host may have processed it too", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	}
	return true
}

// abandoned releases r at once, so another host takes it without waiting
// for its lock to lapse, and gives back what it counted in the task.
func (l shareLedger) abandoned(t *task, r *kgo.Record) {
	if _, ok := l.locks.take(r); !ok {
		return
	}
	r.Ack(kgo.AckRelease)
	l.locks.stats.Released.Add(1)
	t.forgetShared(r)
}
