// Package ledger holds the ledgers: when a record's outcome counts
// (partition.Ledger). Offsets and Txn count it in its partition's offset
// tracker, from which the committer commits the watermark; Share counts it
// when the broker is told ACCEPT, through the locks a share group's poll
// loop holds (ShareLocks). A ledger is given what it needs of a partition
// (its tracker) as a record finishes, never the task, and the engine asks it
// nothing else per record. (DESIGN.md, "Seams: source, ledger, sink,
// committer".)
package ledger

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// Offsets is the at_least_once ledger: the partition's offset tracker
// (RATIONALE.md, "Committing: the watermark", "Done offsets in commit
// metadata").
type Offsets struct {
	// Ordered: ordering partition, whose outcomes leave in offset order
	// through a release order.
	Ordered bool
	// DoneOffsets is kafka.record_done_offsets.
	DoneOffsets bool
}

func (l Offsets) Policy() partition.LedgerPolicy {
	p := partition.LedgerPolicy{Tracks: true, DoneOffsets: l.DoneOffsets}
	if l.Ordered {
		p.Order = partition.ReleaseInOrder
	}
	return p
}

// Done marks r's offset done in its partition's tracker: from there it
// reaches the commit watermark.
func (Offsets) Done(tr *offsets.Tracker, r *kgo.Record) bool { return tr.Done(r.Offset) }

// Abandon leaves r uncommitted: the partition's next owner processes it.
func (Offsets) Abandon(*kgo.Record) bool { return false }

// Txn is the exactly_once ledger (scheduler/internal/commit/txn.go): the
// offset tracker, whose watermark the next cut commits inside the
// transaction.
type Txn struct{}

// Policy: every ordering keeps a release order under exactly_once, with
// places reserved in offset order as records arrive, so that outcomes enter
// a transaction in offset order and a commit covers exactly the records
// whose outputs it carries; a dropped record keeps its place unsettled;
// outcomes count when their transaction commits.
func (Txn) Policy() partition.LedgerPolicy {
	return partition.LedgerPolicy{Order: partition.ReleaseByOffset, Tracks: true, DropKeepsPlace: true, CountsAtCommit: true}
}

// Done marks r's offset done; the next cut commits the watermark in the
// transaction.
func (Txn) Done(tr *offsets.Tracker, r *kgo.Record) bool { return tr.Done(r.Offset) }

// Abandon: r keeps its place unsettled (DropKeepsPlace) and stays
// uncommitted.
func (Txn) Abandon(*kgo.Record) bool { return false }
