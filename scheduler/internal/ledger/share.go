package ledger

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// Share is the consume: share ledger (scheduler/internal/source/share.go):
// each record's acknowledgement to the broker, through the locks the poll
// loop holds.
type Share struct {
	Locks *ShareLocks
	Log   *slog.Logger
}

// Policy: a share pool's records have no order to keep and no watermark.
func (Share) Policy() partition.LedgerPolicy { return partition.LedgerPolicy{} }

// Done accepts r: its outcome is durable. False when r is no longer held
// (released at shutdown, or accepted already).
func (l Share) Done(_ *offsets.Tracker, r *kgo.Record) bool {
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

// Abandon releases r at once, so another host takes it without waiting for
// its lock to lapse; the task gives back what r counted (forget). False
// when r was no longer held.
func (l Share) Abandon(r *kgo.Record) bool {
	if _, ok := l.Locks.Take(r); !ok {
		return false
	}
	r.Ack(kgo.AckRelease)
	l.Locks.Stats.Released.Add(1)
	return true
}
