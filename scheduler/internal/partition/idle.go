package partition

// timers.idle_advance (ABI.md §4.2, "Idle partitions"): a partition whose
// producers went silent never closes its last windows, since stream time
// moves only with records. With idle_advance set, each task with timers
// checks every idle_advance whether its partition is caught up (nothing
// left to fetch, nothing queued or in flight) and decided nothing for that
// long; if so, its stream time moves by the wall-clock time that passed,
// at most idle_advance, and the timers that makes due fire in a round no
// record triggered: under exactly_once in the open transaction, which the
// committer's next cut commits with no input offset of its own.

import "time"

// noteMoved notes that a record was decided now (timersAfter), for the
// idle check: one atomic store a record, of a coarse clock — the end of
// the worker's last call, which ran the record or its run (a record is
// decided right after it) — without a lock or a read of the clock of its
// own. The idle check looks every idle_advance: a time some microseconds
// early changes nothing it decides.
func (w *worker) noteMoved() {
	t := w.t
	if t.d.Config.Timers.IdleAdvance <= 0 {
		return
	}
	var at time.Time
	if w.inst != nil {
		_, at = w.inst.LastCall()
	}
	if at.IsZero() {
		at = time.Now()
	}
	if n := at.UnixNano(); n > t.rel.timers.moved.Load() {
		t.rel.timers.moved.Store(n) // forward: a worker that read the clock earlier leaves it
	}
}

// armIdle starts the task's idle check, when idle_advance is set. Its
// function runs on a goroutine of its own, once per idle_advance; it ends
// once the task stops (it is not armed again).
func (t *Task) armIdle() {
	d := t.d.Config.Timers.IdleAdvance
	if d <= 0 {
		return
	}
	tm := &t.rel.timers
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.idle == nil {
		tm.moved.Store(time.Now().UnixNano())
		tm.idle = time.AfterFunc(d, t.idleCheck)
	}
}

// idleCheck is one idle check (armIdle): it advances an idle partition's
// stream time and fires what that makes due, then checks again after
// idle_advance unless the task stopped.
func (t *Task) idleCheck() {
	d := t.d.Config.Timers.IdleAdvance
	t.mu.Lock()
	stopping, busy := t.q.stopping || t.q.closed, t.q.queued > 0 || t.q.inFlight > 0
	t.mu.Unlock()
	if stopping || t.life.ctx.Err() != nil {
		return
	}
	defer t.rel.timers.idle.Reset(d)
	caughtUp := t.HighWatermark.Load() <= t.position.Load()
	tm := &t.rel.timers
	now := time.Now()
	since := now.Sub(time.Unix(0, tm.moved.Load()))
	tm.mu.Lock()
	active := tm.active
	tm.mu.Unlock()
	if busy || !caughtUp || active || since < d {
		return
	}
	if t.State.Advance(min(since, d).Milliseconds()) < 0 {
		return // no record decided yet: no stream time to move
	}
	tm.moved.Store(now.UnixNano())
	t.d.Stats.TimersIdleRounds.Add(1)
	t.nextFiring(nil, false)
}
