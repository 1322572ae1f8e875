package offsets

import (
	"sort"
	"sync"
)

// Tracker holds, for one partition, every fetched record that is not yet
// done, in offset order, and computes the commit watermark: the offset of the
// first record not done (Kafka's "next offset to consume"). Only done records
// move the watermark, so a commit never covers a record whose outcome is not
// durable. See RATIONALE.md, "Committing: the watermark".
//
// Records are added in offset order (one fetch stream per partition) but may
// be marked done in any order. Safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	live    int     // entries not done
	entries []entry // entries[head:] are live, offsets increasing
	head    int
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
	t.entries = append(t.entries, entry{offset: offset, epoch: epoch})
	t.live++
	t.mu.Unlock()
}

// Done marks offset done and reports whether it was tracked.
func (t *Tracker) Done(offset int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := t.entries[t.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].offset >= offset })
	if i == len(live) || live[i].offset != offset || live[i].done {
		return false
	}
	live[i].done = true
	t.live--
	for t.head < len(t.entries) && t.entries[t.head].done {
		e := t.entries[t.head]
		t.next, t.nextEpoch, t.seen = e.offset+1, e.epoch, true
		t.head++
	}
	// Compact once the dead prefix dominates, so memory follows the live set.
	if t.head > 1024 && t.head*2 > len(t.entries) {
		n := copy(t.entries, t.entries[t.head:])
		t.entries = t.entries[:n]
		t.head = 0
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
	live := t.entries[t.head:]
	switch {
	case len(live) > 0:
		offset, epoch = live[0].offset, -1
		if t.seen {
			epoch = t.nextEpoch
		}
		for _, e := range live[1:] {
			if e.done {
				doneAbove = append(doneAbove, e.offset)
			}
		}
		return offset, epoch, doneAbove, true
	case t.seen:
		return t.next, t.nextEpoch, nil, true
	}
	return 0, 0, nil, false
}
