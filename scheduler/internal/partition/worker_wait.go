package partition

// A worker's waiting: what it waits for between turns, when it wakes,
// and how it parks on the task's idle list (worker.turn).

import (
	"time"
)

// idleEntry is how a worker waits on its task's idle list (dispatch.go).
// wake is the worker's own hand-off: a waker takes the worker off
// task.pool.idleW and sends here (buffer 1, never blocks); lastUsed and
// keptUntil are written by the worker's goroutine, and read by
// taskPool.pushIdle under task.mu while the worker is on task.pool.idleW.
type idleEntry struct {
	wake      chan struct{}
	lastUsed  time.Time // when it last started a record or had one pending
	keptUntil time.Time // kept as part of the minimum: no idle check before
}

// workerWait is one wait of a worker: what wakes it, and how park listed it.
type workerWait struct {
	swapC   <-chan struct{}  // a new version deployed
	timerC  <-chan time.Time // its next deadline, due retry or recheck
	stopC   <-chan struct{}  // the task stopping (while waiting for work)
	idleC   <-chan time.Time // its idle timeout (while waiting for work)
	waiting bool             // on task.pool.idleW
	blocked bool             // counted in task.pool.blocked
}

// wait waits, when the worker started nothing, for work, a completion, a
// deadline, a due retry, a deploy or the task stopping. It reports false
// when the worker retired at its idle timeout.
func (w *worker) wait(l *workerLoop, stopping, pending, refused bool) bool {
	ww := workerWait{swapC: w.t.d.Mods.Swapped()}
	canTake := !refused && w.mayTake()
	limited := !canTake && w.instLimited()
	if limited {
		w.noteAsyncHeld()
	}
	// Held back by a host-wide bound (asynchronous operations, held
	// outputs): look again soon.
	recheck := !canTake && !limited
	if next := w.nextWake(pending, recheck); !next.IsZero() {
		l.next.Reset(max(time.Until(next), 0))
		ww.timerC = l.next.C
	}
	if !w.park(l, &ww, stopping, canTake, pending) {
		return true // records came in since admit: take them
	}
	expired := w.sleep(l, &ww)
	return !w.unpark(l, &ww, expired)
}

// nextWake is when the worker must look again without being woken: its
// instance's next deadline, its first inline retry's due time, or in 20 ms
// when recheck (a host-wide bound holds it back); zero if none. Retries
// held back by the instance's bound on asynchronous operations have no
// time: a completion, which frees room, wakes the worker (sleep: the
// instance's Ready), and one held back by the host's bound is looked at
// again with recheck. Never a time past for a retry the worker cannot
// start: it would turn without end.
func (w *worker) nextWake(pending, recheck bool) time.Time {
	var next time.Time
	if pending {
		next = w.inst.NextDeadline()
	}
	hold := holdNone
	if w.retry.len() > 0 {
		hold = w.retryHold()
	}
	if hold == holdHostAsync {
		recheck = true
	}
	if due := w.retry.next(); !due.IsZero() && hold == holdNone && (next.IsZero() || due.Before(next)) {
		next = due
	}
	if recheck {
		if n := time.Now().Add(20 * time.Millisecond); next.IsZero() || n.Before(next) {
			next = n
		}
	}
	return next
}

// park decides under task.mu how the worker waits: while the task stops,
// for its own records only; able to take records, on the idle list (with its
// idle timer when it holds nothing), unless records came in since admit,
// when it reports false to take them; held back, counted as blocked while
// the other workers take the records.
func (w *worker) park(l *workerLoop, ww *workerWait, stopping, canTake, pending bool) bool {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case stopping:
	case canTake:
		if t.runnableLocked() {
			return false
		}
		// Wait for work on the idle list, in order of last use.
		t.pool.pushIdle(w)
		ww.waiting, ww.stopC = true, t.life.stopCh
		if !pending && w.retry.len() == 0 && l.idleTimeout > 0 {
			at := w.idle.lastUsed.Add(l.idleTimeout)
			if at.Before(w.idle.keptUntil) {
				at = w.idle.keptUntil
			}
			l.idle.Reset(max(time.Until(at), 0))
			ww.idleC = l.idle.C
		}
	default:
		// Held back: records are for the other workers meanwhile.
		t.pool.blocked++
		ww.blocked = true
		t.dispatchLocked()
	}
	return true
}

// sleep gives up the worker's core and waits for whatever ww names; it
// reports whether the idle timeout expired. The timers are stopped and
// drained after, so the next wait starts clean.
func (w *worker) sleep(l *workerLoop, ww *workerWait) (expired bool) {
	var ready <-chan struct{}
	if w.inst != nil {
		ready = w.inst.Ready()
		w.inst.Yield() // the core is for other workers while this one waits
	}
	select {
	case <-ww.swapC:
	case <-w.idle.wake:
	case <-ww.stopC:
	case <-ready:
	case <-ww.timerC:
	case <-ww.idleC:
		expired = true
	case <-w.t.life.ctx.Done():
	}
	if ww.timerC != nil && !l.next.Stop() {
		select {
		case <-l.next.C:
		default:
		}
	}
	if ww.idleC != nil && !expired && !l.idle.Stop() {
		select {
		case <-l.idle.C:
		default:
		}
	}
	return expired
}

// unpark undoes park after the wait: off the blocked count and the idle
// list (a waker may have taken it off already, to hand it records: its wake
// signal is consumed here). A worker whose idle timeout expired on the list
// retires if the task is above its minimum (unpark reports true) and
// otherwise stays, warm, for another idle_timeout.
func (w *worker) unpark(l *workerLoop, ww *workerWait, expired bool) (retired bool) {
	if !ww.waiting && !ww.blocked {
		return false
	}
	t := w.t
	t.mu.Lock()
	if ww.blocked {
		t.pool.blocked--
	}
	onList := ww.waiting && t.pool.removeIdle(w)
	if expired && onList {
		if t.retireLocked(w) {
			w.retired = true
			t.mu.Unlock()
			return true
		}
		// Part of the minimum: stay, warm, and look again after another
		// idle_timeout.
		w.idle.keptUntil = time.Now().Add(l.idleTimeout)
	}
	t.mu.Unlock()
	select {
	case <-w.idle.wake:
	default:
	}
	if expired && onList && w.inst == nil {
		w.instance()
	}
	return false
}
