package state

// Event-time timers (ABI.md §4.2): a timer (key, at) is a state write of
// the record that sets or deletes it, kept under statestore.TimerKey (an
// empty value while set), so it goes to the changelog with the record's
// other writes, is overlaid until the record's commit, is applied to the
// store by the flush and restored with the state, and counts in
// state.max_bytes (its encoded key). The store keeps the timers in (at,
// key) order, so the due ones are the first of a scan of
// statestore.TimerPrefix; the partition keeps only a lower bound of their
// earliest at (nextTimer), so a record that makes none due costs one
// comparison, and a guest's million timers cost the host no memory beyond
// the store's.

import (
	"math"
	"slices"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// Timer is a timer of the partition: its key and at (milliseconds of
// stream time).
type Timer struct {
	Key []byte
	At  int64
}

// SetTimer sets the timer (key, at) for the record (host.Timers): a put of
// its key, checked as a state key and bounded by state.max_bytes.
func (rs *Record) SetTimer(key []byte, at int64) abi.Errno {
	if e := rs.ts.checkTimer(key); e != 0 {
		return e
	}
	if rs.run != nil {
		rs.run.timerSet(at) // the run's gate ends it before the timer is due
	}
	return rs.put(timerKey(key, at), []byte{}, true)
}

// DeleteTimer removes the timer (key, at) for the record (host.Timers).
func (rs *Record) DeleteTimer(key []byte, at int64) abi.Errno {
	if e := rs.ts.checkTimer(key); e != 0 {
		return e
	}
	return rs.delete(timerKey(key, at), true)
}

// timerKey is the timer (key, at)'s state key (statestore.TimerKey) for a
// write, which keeps it: made in one allocation of its size, not grown
// through three appends (a firing's delete and a record's set were two
// allocations each).
func timerKey(key []byte, at int64) []byte {
	return statestore.TimerKey(make([]byte, 0, len(statestore.TimerPrefix)+8+len(key)), key, at)
}

// WrittenTimer reports whether the record set or deleted the timer (key,
// at) (host.Timers).
func (rs *Record) WrittenTimer(key []byte, at int64) bool {
	var a [key2Stack]byte
	_, ok := rs.Written(statestore.TimerKey(a[:0], key, at))
	return ok
}

// checkTimer answers whether a timer's key may be used by a record of the
// partition: a state key's rules (its size, its partition).
func (ts *Partition) checkTimer(key []byte) abi.Errno {
	if len(key) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	return ts.checkPartition(key)
}

// timerSet notes a committed write of key (under ts.mu): a timer set
// lowers nextTimer to its at.
func (ts *Partition) timerSet(key []byte) {
	if _, at, ok := statestore.SplitTimerKey(key); ok {
		ts.timers.next = min(ts.timers.next, at)
		ts.timers.sets++
		ts.timersSet.Add(1)
	}
}

// firstTimer is the at of the store's first timer (math.MaxInt64: none,
// or the store cannot be read: its first read says so).
func (ts *Partition) firstTimer() int64 {
	first := int64(math.MaxInt64)
	_ = ts.ps.store.Scan([]byte(statestore.TimerPrefix), nil, func(k, _ []byte) bool {
		if _, at, ok := statestore.SplitTimerKey(k); ok {
			first = at
		}
		return false
	})
	return first
}

// StreamTime is the partition's stream time: the largest timestamp of its
// records decided so far, -1 before any (ABI.md §4.2).
func (ts *Partition) StreamTime() int64 {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.clock.streamTime
}

// Advance moves the partition's stream time forward by ms (milliseconds)
// and returns it: an idle partition's advance by the wall clock
// (timers.idle_advance). A partition that decided no record yet (-1) has
// no stream time to move. The next commit writes it (CommitAt with a
// timestamp), as a dead-lettered record's.
func (ts *Partition) Advance(ms int64) int64 {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.clock.streamTime >= 0 && ms > 0 && ts.clock.streamTime <= math.MaxInt64-ms {
		ts.clock.streamTime += ms
	}
	return ts.clock.streamTime
}

// dueBatch is how many due timers one scan of Due finds at most; the rest
// of them wait in Partition.dueCache for the next calls.
const dueBatch = 256

// Due lists up to n of the timers with at <= t, in (at, key) order,
// through the overlay: the timers the records decided so far set and did
// not delete. The keys are the caller's. A partition none of whose timers
// can be due (nextTimer after t) answers at once; then the due timers a
// previous scan found answer, when n of them are still set and no timer
// was set since (dueCached); failing those, the store is scanned from its
// first timer, with the overlay merged (Partition.scan), and stops at the
// first timer not due or at dueBatch of them.
func (ts *Partition) Due(t int64, n int) ([]Timer, error) {
	ts.mu.Lock()
	next, sets := ts.timers.next, ts.timers.sets
	ts.mu.Unlock()
	if t < next || n <= 0 {
		return nil, nil
	}
	if due, ok, err := ts.dueCached(t, n); ok || err != nil {
		return due, err
	}
	var due []Timer
	later := int64(math.MaxInt64)
	limit := max(n, dueBatch)
	e := ts.scan(nil, []byte(statestore.TimerPrefix), nil, func(k, _ []byte) bool {
		key, at, ok := statestore.SplitTimerKey(k)
		switch {
		case !ok:
			return true
		case at > t:
			later = at
			return false
		}
		due = append(due, Timer{Key: append([]byte{}, key...), At: at})
		return len(due) < limit
	})
	if e != 0 {
		return nil, e
	}
	ts.mu.Lock()
	ts.timers.dueCache = nil
	if ts.timers.sets == sets {
		if len(due) == 0 {
			// No timer was set while the scan ran: none is before later.
			ts.timers.next = later
		}
		ts.timers.dueCache, ts.timers.dueSets, ts.timers.dueT = due, sets, t
	}
	ts.mu.Unlock()
	out := make([]Timer, min(n, len(due)))
	copy(out, due)
	for i := range out {
		out[i].Key = append([]byte{}, out[i].Key...) // the caller's
	}
	return out, nil
}

// dueCached answers Due from the timers its last scan found due
// (dueCache): ok when n of them are still set and no timer was set since
// the scan (a set may sort before them: it empties the cache), asked at
// the scan's stream time or later (dueT; it only goes forward). Any due
// timer the cache does not hold sorts after those it does (it was past
// the scan's dueBatch, or its at is after the scan's stream time), so the
// first n still set are the first n due. The timers found deleted (the
// firings delete their own) leave the cache.
func (ts *Partition) dueCached(t int64, n int) ([]Timer, bool, error) {
	var due []Timer
	for i := 0; len(due) < n; {
		ts.mu.Lock()
		if ts.timers.dueSets != ts.timers.sets || t < ts.timers.dueT {
			ts.timers.dueCache = nil
		}
		if i >= len(ts.timers.dueCache) {
			ts.mu.Unlock()
			return nil, false, nil
		}
		tm := ts.timers.dueCache[i]
		ts.mu.Unlock()
		_, _, set, err := ts.get(nil, statestore.TimerKey(nil, tm.Key, tm.At))
		if err != nil {
			return nil, false, err
		}
		if set {
			due = append(due, Timer{Key: append([]byte{}, tm.Key...), At: tm.At})
			i++
			continue
		}
		ts.mu.Lock()
		if i < len(ts.timers.dueCache) && ts.timers.dueCache[i].At == tm.At && string(ts.timers.dueCache[i].Key) == string(tm.Key) {
			ts.timers.dueCache = slices.Delete(ts.timers.dueCache, i, i+1)
		}
		ts.mu.Unlock()
	}
	return due, true, nil
}

// DueFirst is Due(t, 1) for a round's next firing, without its
// allocations when the last scan's due timers answer (dueCached): the
// timer is returned by value and its key is the cache's, shared and never
// changed (the caller only reads it). ok is false when no timer is due.
func (ts *Partition) DueFirst(t int64) (tm Timer, ok bool, err error) {
	ts.mu.Lock()
	next := ts.timers.next
	ts.mu.Unlock()
	if t < next {
		return Timer{}, false, nil
	}
	var a [key2Stack]byte
	for {
		ts.mu.Lock()
		if ts.timers.dueSets != ts.timers.sets || t < ts.timers.dueT {
			ts.timers.dueCache = nil
		}
		if len(ts.timers.dueCache) == 0 {
			ts.mu.Unlock()
			break
		}
		tm = ts.timers.dueCache[0]
		ts.mu.Unlock()
		_, _, set, err := ts.get(nil, statestore.TimerKey(a[:0], tm.Key, tm.At))
		if err != nil {
			return Timer{}, false, err
		}
		if set {
			return tm, true, nil
		}
		ts.mu.Lock()
		if len(ts.timers.dueCache) > 0 && ts.timers.dueCache[0].At == tm.At && string(ts.timers.dueCache[0].Key) == string(tm.Key) {
			ts.timers.dueCache = ts.timers.dueCache[1:]
		}
		ts.mu.Unlock()
	}
	due, err := ts.Due(t, 1)
	if err != nil || len(due) == 0 {
		return Timer{}, false, err
	}
	return due[0], true, nil
}
