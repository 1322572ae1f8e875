package partition

import (
	"slices"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
)

// Dispatch: which worker of a task takes the next runnable record, when the
// pool grows and when it shrinks (RATIONALE.md, "Pools and ordering").
//
//   - Idle workers wait in task.pool.idleW, ordered by when each last had work
//     (lastUsed), most recent last. A record that nobody is taking wakes
//     the most recently used one, through that worker's own wake channel:
//     work concentrates on the fewest instances that keep up, and the least
//     recently used ones stay untouched until instances.idle_timeout retires
//     them.
//   - A worker already taking records (a "taker": running one, or between
//     being woken and waiting again) takes the next one itself when it is
//     done. Another worker is woken, or an instance borrowed when none is
//     idle, only once records have been runnable without pause for
//     instances.grow_after: the records actually wait, the takers do not keep up.
//     Borrowing then happens at most once per instances.grow_after per task.
//   - A task with no worker at all (retry tasks start empty) borrows at
//     once when a record is runnable.
//
// With instances: auto the task's maximum is its sizer's target
// (sizing.Pool, scheduler/internal/sizing), moved once per window by controlLocked: growing stops
// at the target (counted as capped: the sizer's queueing signal), and
// workers above it retire as soon as they hold no record instead of after
// idle_timeout.
//
// Everything here runs under task.mu. Lock order, outermost first:
// releaser.mu, Set.mu, task.mu, then leaves such as Budget.mu
// (Budget.asyncMu is taken without task.mu; the async sizer's lock is a
// leaf, taken with no other lock held: DESIGN.md, "Lock order").
// The wake channels and the kick timer are only ever sent on or reset
// without blocking, so holding task.mu there is safe.

// The pool's methods below are called with task.mu held.

// pushIdle makes w wait for work, in order of last use.
func (p *taskPool) pushIdle(w *worker) {
	i, _ := slices.BinarySearchFunc(p.idleW, w.idle.lastUsed, func(x *worker, at time.Time) int {
		if x.idle.lastUsed.After(at) {
			return 1
		}
		return -1 // equal times: after the ones already waiting
	})
	p.idleW = slices.Insert(p.idleW, i, w)
}

// removeIdle takes w off the idle list; it reports whether w was on it
// (false: a waker took it off to hand it records).
func (p *taskPool) removeIdle(w *worker) bool {
	i := slices.Index(p.idleW, w)
	if i < 0 {
		return false
	}
	p.idleW = slices.Delete(p.idleW, i, i+1)
	return true
}

// wake hands the runnable records to the most recently used idle worker.
// The worker is off the idle list from now on: it counts as a taker until
// it waits again.
func (p *taskPool) wake() bool {
	n := len(p.idleW)
	if n == 0 {
		return false
	}
	w := p.idleW[n-1]
	p.idleW[n-1] = nil
	p.idleW = p.idleW[:n-1]
	select {
	case w.idle.wake <- struct{}{}:
	default: // already signalled
	}
	return true
}

// takers counts the workers that will take runnable records without
// being woken: not waiting for work and not held back from taking any.
func (p *taskPool) takers() int { return p.workers - len(p.idleW) - p.blocked }

// add registers w under the lowest free slot.
func (p *taskPool) add(w *worker) int {
	if p.live == nil {
		p.live = map[int]*worker{}
	}
	slot := 0
	for p.live[slot] != nil {
		slot++
	}
	p.live[slot] = w
	return slot
}

// dispatch runs dispatchLocked; the kick timer and the pipeline's flow loop
// call it (records become due, or have waited instances.grow_after, with no event in
// the task to notice).
func (t *Task) dispatch() { t.DispatchAbove() }

// DispatchAbove is dispatch, reporting whether the task holds instances
// above instances.min (the flow loop tells the async sizer).
func (t *Task) DispatchAbove() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pool.kickAt = time.Time{}
	t.dispatchLocked()
	return t.pool.workers > t.d.Config.Instances.Min
}

// maxLocked is the most instances the task may have now: its sizer's
// target under instances: auto, else instances.max.
func (t *Task) maxLocked() int {
	if t.pool.auto.sizer != nil {
		return t.pool.auto.sizer.Target
	}
	return t.d.Config.Instances.Max
}

// controlLocked closes the sizer's window once sizing.Window has passed (or
// sizing.MinWindow, when records already waited at the target and every
// instance could have made a few calls: a backlog is met within tens of
// milliseconds, on evidence) and moves the target; workers above a lowered
// target are woken to retire.
func (t *Task) controlLocked(now time.Time) {
	if t.pool.auto.sizer == nil || t.q.stopping {
		return
	}
	if el := now.Sub(t.pool.auto.ctlAt); el < sizing.MinWindow || (el < sizing.Window && (t.pool.auto.capped < sizing.Early || t.pool.auto.calls.Load()-t.pool.auto.ctlCalls < int64(sizing.EarlyCalls*t.pool.workers))) {
		return
	}
	t.pool.auto.ctlCalls = t.pool.auto.calls.Load()
	wait, run := t.pool.auto.callWait.Load(), t.pool.auto.callRun.Load()
	m := sizing.Sample{Capped: t.pool.auto.capped, Wait: time.Duration(wait - t.pool.auto.ctlWait), Run: time.Duration(run - t.pool.auto.ctlRn), Workers: t.pool.workers, Warm: int(t.pool.auto.warm.Load())}
	busy, cores := t.d.Mods.Current().M.CoreUse()
	if el := now.Sub(t.pool.auto.ctlAt); !t.pool.auto.ctlAt.IsZero() && el > 0 && t.pool.auto.ctlBusy > 0 {
		m.IdleCores = max(float64(cores)-float64(busy-t.pool.auto.ctlBusy)/float64(el), 0)
	}
	t.pool.auto.ctlAt, t.pool.auto.capped, t.pool.auto.ctlWait, t.pool.auto.ctlRn, t.pool.auto.ctlBusy = now, 0, wait, run, busy
	old := t.pool.auto.sizer.Target
	if !t.pool.auto.sizer.Step(now, m) {
		return
	}
	t.d.Log.Debug("instances: auto: target changed", "topic", t.Topic, "partition", t.Partition, "from", old, "to", t.pool.auto.sizer.Target, "reason", t.pool.auto.sizer.Reason, "detail", t.pool.auto.sizer.Detail)
	// Idle workers above the target, least recently used first: woken,
	// they find the pool over its target and retire (worker.admit).
	for n := t.pool.workers - t.pool.auto.sizer.Target; n > 0 && len(t.pool.idleW) > 0; n-- {
		w := t.pool.idleW[0]
		t.pool.idleW = slices.Delete(t.pool.idleW, 0, 1)
		select {
		case w.idle.wake <- struct{}{}:
		default:
		}
	}
}

// overTargetLocked reports whether w should retire because the pool is
// above its sizer's target: w holds no record (none waiting on its
// operations, no inline retry).
func (t *Task) overTargetLocked(w *worker) bool {
	return t.pool.auto.sizer != nil && !t.q.stopping && t.pool.workers > t.pool.auto.sizer.Target && t.pool.workers > t.d.Config.Instances.Min &&
		(w.inst == nil || w.inst.Pending() == 0) && w.retry.len() == 0
}

// dispatchLocked makes sure runnable records get a worker: it wakes an idle
// worker when no taker is left, and wakes one more or borrows an instance
// when records have waited instances.grow_after. Called after anything that makes
// records runnable or changes who takes them.
func (t *Task) dispatchLocked() {
	if t.q.stopping {
		return
	}
	now := time.Now()
	t.controlLocked(now)
	if !t.runnableLocked() {
		t.pool.waitSince = time.Time{}
		if u, ok := t.q.free.Peek(); ok && !u.isWork() {
			if due := t.d.Role.due(u.r); !due.IsZero() {
				t.kickLocked(due) // the oldest retry record falls due
			}
		}
		return
	}
	if t.pool.waitSince.IsZero() {
		t.pool.waitSince = now
	}
	switch {
	case t.pool.takers() <= 0 && len(t.pool.idleW) > 0:
		t.pool.wake()
	case t.pool.workers == 0:
		t.growLocked()
	case now.Sub(t.pool.waitSince) >= t.d.Config.Instances.GrowAfter:
		if !t.pool.wake() {
			t.growLocked()
		}
		t.pool.waitSince = now // the next step only if records still wait instances.grow_after from now
	}
	if len(t.pool.idleW) > 0 || t.pool.workers < t.d.Config.Instances.Max {
		t.kickLocked(t.pool.waitSince.Add(t.d.Config.Instances.GrowAfter)) // else nothing to do but wait for the workers
	}
}

// kickLocked makes the kick timer run dispatch at at, unless it is set to
// run earlier.
func (t *Task) kickLocked(at time.Time) {
	if !t.pool.kickAt.IsZero() && !t.pool.kickAt.After(time.Now()) {
		t.pool.kickAt = time.Time{} // fired (or about to): not a bound any more
	}
	if !t.pool.kickAt.IsZero() && !at.Before(t.pool.kickAt) {
		return
	}
	t.pool.kickAt = at
	t.pool.kick.Reset(max(time.Until(at), 0))
}

// growLocked borrows an instance from the host's budget, under the task's
// maximum.
func (t *Task) growLocked() {
	if t.q.stopping || t.pool.workers >= t.d.Config.Instances.Max {
		return
	}
	if t.pool.workers >= t.maxLocked() {
		t.pool.auto.capped++ // records wait, the target holds the pool back: the sizer's signal
		return
	}
	if t.d.Budget.Borrow(t.d.Inst.Bytes) {
		t.ps.Borrowed.Add(1)
		t.spawnLocked(true)
	}
}

// retireLocked decides whether w, idle since w.lastUsed+idle_timeout, gives
// its instance back: while the task is above its minimum and no record is
// runnable. Which instance goes does not matter (the budget counts
// instances, not identities): the least recently used one times out first.
func (t *Task) retireLocked(w *worker) bool {
	if t.q.stopping || t.runnableLocked() || t.pool.workers <= t.d.Config.Instances.Min {
		return false
	}
	t.pool.workers--
	t.ps.Released.Add(1)
	return true
}
