package commit

import (
	"context"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// HeldRecords are the records a share group's source holds
// (ledger.ShareLocks): ReleaseAll gives every one back to the broker for
// redelivery and reports how many.
type HeldRecords interface{ ReleaseAll() int }

// ShareAcks is the committer of a consume: share pipeline: it commits no
// offsets (each record is acknowledged as it finishes:
// ledger.Share), and at shutdown it gives back every record still
// held, so that another host takes it at once.
type ShareAcks struct {
	d     Deps
	locks HeldRecords
}

// NewShareAcks is the committer of the share pipeline d is of, whose
// source holds the records' locks in locks.
func NewShareAcks(d Deps, locks HeldRecords) *ShareAcks {
	return &ShareAcks{d: d, locks: locks}
}

// Start: nothing runs on its own (the source renews the records' locks).
func (*ShareAcks) Start() {}

// CommitNow: there is nothing to commit (each record was acknowledged as
// it finished), and a share group has no partition assignment: nothing is
// revoked or lost.
func (*ShareAcks) CommitNow(context.Context, map[string][]int32, []*partition.Task, bool) bool {
	return true
}

// Final releases every record still held once the tasks drained: records
// in progress finished within shutdown.drain_timeout, and their produces
// are acknowledged.
func (c *ShareAcks) Final(context.Context, []*partition.Task) {
	if n := c.locks.ReleaseAll(); n > 0 {
		c.d.Log.Info("released records not finished at shutdown; other hosts take them", "records", n)
	}
}

func (c *ShareAcks) Close() { c.d.Client.Close() }
