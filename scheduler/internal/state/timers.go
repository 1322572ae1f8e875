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
// lowers nextTimer to its at, and empties the due timers' cache if it
// was due when they were found (it may sort among them; a later one sorts
// after them all, dueCached).
func (ts *Partition) timerSet(key []byte) {
	if _, at, ok := statestore.SplitTimerKey(key); ok {
		ts.timers.next = min(ts.timers.next, at)
		ts.timers.sets++
		ts.timersSet.Add(1)
		if at <= ts.timers.dueT {
			ts.dropDue()
		} else {
			ts.timers.setSince = min(ts.timers.setSince, at)
		}
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

// dueBatch is how many due timers one scan of Due finds at most; they
// wait in Partition.dueCache for the next calls. It bounds what a
// partition holds of its due timers (their keys, at most
// abi.MaxStateKeyBytes each) and lets one scan serve a round of a
// thousand windows that close together (a window per key of a
// partition).
const dueBatch = 1024

// Due lists up to n of the timers with at <= t, in (at, key) order,
// through the overlay: the timers the records decided so far set and did
// not delete. The keys are the caller's. A partition none of whose timers
// can be due (nextTimer after t) answers at once; then the due timers a
// previous scan found answer, when n of them are still set, or when it
// found them all and no other can be due yet (dueCached); failing those,
// the store is scanned from its first timer, with the overlay's due
// timers merged (scanDue), and stops at the first timer not due or at
// dueBatch of them.
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
	limit := max(n, dueBatch)
	later, e := ts.scanDue(t, func(key []byte, at int64) bool {
		due = append(due, Timer{Key: append([]byte{}, key...), At: at})
		return len(due) < limit
	})
	if e != 0 {
		return nil, e
	}
	ts.mu.Lock()
	ts.timers.scans++
	ts.dropDue()
	if ts.timers.sets == sets {
		// No timer was set while the scan ran: none is before later but
		// those found due.
		if len(due) == 0 {
			ts.timers.next = later
		}
		ts.timers.dueCache, ts.timers.dueT = due, t
		ts.timers.dueAll, ts.timers.dueLater, ts.timers.setSince = len(due) < limit, later, math.MaxInt64
	}
	ts.mu.Unlock()
	out := make([]Timer, min(n, len(due)))
	copy(out, due)
	for i := range out {
		out[i].Key = append([]byte{}, out[i].Key...) // the caller's
	}
	return out, nil
}

// scanDue calls fn for each timer with at <= t, in (at, key) order, until
// it returns false: the store's from its first timer and the overlay's
// (the overlay's due timers alone are merged, not its every timer: the
// next window's, set meanwhile, are left where they are). later is at or
// before the at of every timer set after t (math.MaxInt64: none), when
// fn took every due timer: the first the store's scan met past t, or an
// earlier one of the overlay's.
func (ts *Partition) scanDue(t int64, fn func(key []byte, at int64) bool) (later int64, e abi.Errno) {
	later = math.MaxInt64
	g, _ := statestore.Key2Group([]byte(statestore.TimerPrefix))
	ts.mu.Lock()
	group := ts.groups.m[string(g)]
	newer := make([]newerKey, 0, len(group))
	for k := range group {
		at, ok := statestore.TimerAt(k)
		v := ts.overlay[k].value
		switch {
		case !ok:
		case at <= t:
			newer = append(newer, newerKey{k, v})
		case v != nil:
			later = min(later, at)
		}
	}
	ts.mu.Unlock()
	e = ts.merge(newer, []byte(statestore.TimerPrefix), nil, func(k, _ []byte) bool {
		key, at, ok := statestore.SplitTimerKey(k)
		switch {
		case !ok:
			return true
		case at > t:
			later = min(later, at)
			return false
		}
		return fn(key, at)
	})
	return later, e
}

// dropDue empties the due timers' cache (under ts.mu).
func (ts *Partition) dropDue() {
	ts.timers.dueCache, ts.timers.dueAll = nil, false
}

// dueNoneBut tells (under ts.mu) that no timer is due by t but those the
// cache holds: the last scan found every timer due by its stream time
// (dueAll), and both the first timer it saw past it and the first set
// since are after t.
func (ts *Partition) dueNoneBut(t int64) bool {
	return ts.timers.dueAll && t < min(ts.timers.dueLater, ts.timers.setSince)
}

// dueCached answers Due from the timers its last scan found due
// (dueCache): ok when n of them are still set, asked at the scan's stream
// time or later (dueT; it only goes forward). A timer set since the scan
// with an at by dueT may sort before them: it empties the cache
// (timerSet). Any other due timer the cache does not hold sorts after
// those it does (it was past the scan's dueBatch, or its at is after the
// scan's stream time), so the first n still set are the first n due; ok
// too with fewer when the cache holds every timer due by t (dueNoneBut).
// The timers found deleted (the firings delete their own) leave the
// cache.
func (ts *Partition) dueCached(t int64, n int) ([]Timer, bool, error) {
	var due []Timer
	for i := 0; len(due) < n; {
		ts.mu.Lock()
		if t < ts.timers.dueT {
			ts.dropDue()
		}
		if i >= len(ts.timers.dueCache) {
			all := ts.dueNoneBut(t)
			ts.mu.Unlock()
			if all {
				return due, true, nil
			}
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
		if t < ts.timers.dueT {
			ts.dropDue()
		}
		if len(ts.timers.dueCache) == 0 {
			if ts.dueNoneBut(t) {
				// A round's end: its timers fired, and none is due
				// after them. The first that may be is a bound of all.
				ts.timers.next = max(ts.timers.next, min(ts.timers.dueLater, ts.timers.setSince))
				ts.mu.Unlock()
				return Timer{}, false, nil
			}
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
