package state

import "math"

// runClock is what a run knows of stream time and timers beyond what the
// partition knows (ABI.md §4.2, "Firing rule"): a run's records are
// decided only after its call, so during it the partition's clock and
// timers are those of the records before the run. Record k of a run reads
// as stream time what it would read run alone after records 0..k-1 were
// decided (Record.StreamTime), and the worker's gate asks before record k
// whether a timer may be due by then (Run.TimerMayBeDue), to end the run
// before it: the due timers then fire after the run's last record, before
// record k, as on the single path. Used by the run's worker only, during
// the call (Begin, BeginAt, SetTimer and the gate run on its goroutine).
type runClock struct {
	// before[k] is the largest timestamp of records 0..k-1 of the run
	// (math.MinInt64: none yet, or begun without one: Begin); last is
	// that of all records begun.
	before []int64
	last   int64
	// timerMin is the earliest at of the timers the run's records set so
	// far (math.MaxInt64: none). A timer a record sets and a later one
	// deletes still counts: the gate may end a run early, never late.
	timerMin int64
}

// reset makes c a new run's.
func (c *runClock) reset() {
	c.before = c.before[:0]
	c.last, c.timerMin = math.MinInt64, math.MaxInt64
}

// begin notes the next record of the run, of timestamp (milliseconds;
// math.MinInt64: its decision moves no stream time the run reads).
func (c *runClock) begin(timestamp int64) {
	c.before = append(c.before, c.last)
	c.last = max(c.last, timestamp)
}

// BeginAt is Begin for a record of timestamp (milliseconds) that, once
// decided, moves the partition's stream time to it: the records after it
// in the run read it as their stream time (Record.StreamTime), as they
// would run alone after it. Only for records decided as they end (a
// synchronous module's): one that may end pending is begun with Begin.
func (r *Run) BeginAt(timestamp int64) *Record {
	rs := r.begin()
	r.clock.begin(timestamp)
	return rs
}

// TimerMayBeDue reports whether a timer may be due once records 0..k-1
// of the run are decided: the partition's earliest timer (a lower bound,
// partTimers.next) or one the run's records set, at or before the stream
// time those records raise. Asked before record k starts (the worker's
// gate); true may be wrong (the run then only ends early), false is not.
func (r *Run) TimerMayBeDue(k int) bool {
	ts := r.ts
	ts.mu.Lock()
	now, next := ts.clock.streamTime, ts.timers.next
	ts.mu.Unlock()
	if k < len(r.clock.before) {
		now = max(now, r.clock.before[k])
	}
	return min(next, r.clock.timerMin) <= now
}

// timeBefore is the largest timestamp of the records of the run before
// record k (math.MinInt64: none).
func (r *Run) timeBefore(k int) int64 {
	if k < len(r.clock.before) {
		return r.clock.before[k]
	}
	return math.MinInt64
}

// timerSet notes a timer a record of the run set.
func (r *Run) timerSet(at int64) { r.clock.timerMin = min(r.clock.timerMin, at) }
