package offsets

import (
	"sync"

	"github.com/wasmstream/wasmstream/scheduler/internal/fifo"
)

// Tracker holds, for one partition, every fetched record that is not yet
// done, in offset order, and computes the commit watermark: the offset of the
// first record not done (Kafka's "next offset to consume"). Only done records
// move the watermark, so a commit never covers a record whose outcome is not
// durable. See RATIONALE.md, "Committing: the watermark".
//
// Records are added in offset order (one fetch stream per partition) but may
// be marked done in any order. The entries sit in a fifo.Queue (a ring
// buffer): adding one writes the slot after the last, the done prefix leaves
// from the front, and Done finds its entry by binary search over the queue's
// positions, so once the ring has grown to the partition's working size
// (what it holds fetched ahead) the tracker allocates nothing. Safe for
// concurrent use.
type Tracker struct {
	mu      sync.Mutex
	live    int               // entries not done
	entries fifo.Queue[entry] // from the first entry not done, offsets increasing
	// next is the watermark when every live entry is done: one past the
	// highest offset seen; valid when seen.
	next      int64
	nextEpoch int32
	seen      bool
}

type entry struct {
	offset int64
	epoch  int32
	done   bool
}

// Add records that offset was fetched.
func (t *Tracker) Add(offset int64, epoch int32) {
	t.mu.Lock()
	t.entries.Push(entry{offset: offset, epoch: epoch})
	t.live++
	t.mu.Unlock()
}

// Done marks offset done and reports whether it was tracked.
func (t *Tracker) Done(offset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := &t.entries
	i := q.Index(func(e *entry) bool { return e.offset >= offset })
	if i == q.Len() {
		return false
	}
	e := q.At(i)
	if e.offset != offset || e.done {
		return false
	}
	e.done = true
	t.live--
	for q.Len() > 0 && q.At(0).done {
		f, _ := q.Pop()
		t.next, t.nextEpoch, t.seen = f.offset+1, f.epoch, true
	}
	return true
}

// Watermark returns the offset to commit (the first offset not done) with the
// leader epoch of the last done record, and false when nothing is done yet.
func (t *Tracker) Watermark() (offset int64, epoch int32, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next, t.nextEpoch, t.seen
}

// Pending is the number of tracked records not yet done.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

// CommitPoint returns what to commit: the watermark (the first offset not
// done) with the leader epoch of the record before it (-1 if unknown), and
// the done offsets above it, ascending. ok is false when nothing was fetched.
func (t *Tracker) CommitPoint() (offset int64, epoch int32, doneAbove []int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := &t.entries
	switch {
	case q.Len() > 0:
		offset, epoch = q.At(0).offset, -1
		if t.seen {
			epoch = t.nextEpoch
		}
		for i := 1; i < q.Len(); i++ {
			if e := q.At(i); e.done {
				doneAbove = append(doneAbove, e.offset)
			}
		}
		return offset, epoch, doneAbove, true
	case t.seen:
		return t.next, t.nextEpoch, nil, true
	}
	return 0, 0, nil, false
}
