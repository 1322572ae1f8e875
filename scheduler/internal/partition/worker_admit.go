package partition

// A worker's admission: whether it may take records now (its instance's
// bounds, the host's, a new version), and taking them from the task's
// lanes, one run at a time.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// instLimited reports whether the instance's own bound on asynchronous
// operations holds it back.
func (w *worker) instLimited() bool {
	if w.inst == nil {
		return false
	}
	return w.inst.AsyncInFlight() >= w.asyncLimit()
}

// asyncLimit is the bound on asynchronous operations of one instance now:
// the async sizer's limit, or async.max_in_flight.
func (w *worker) asyncLimit() int {
	if a := w.t.d.Inst.AsyncSize; a != nil {
		return int(a.Limit.Load())
	}
	return w.t.d.Config.Async.MaxInFlight
}

// asyncRoom is how many records the single path would start on the
// worker's instance before its bound held it back, if each started one
// operation: a run of an asynchronous module takes no more (at least one,
// as mayTake let the worker take one).
func (w *worker) asyncRoom() int {
	n := w.asyncLimit()
	if w.inst != nil {
		n -= w.inst.AsyncInFlight()
	}
	return max(n, 1)
}

// noteAsyncHeld tells the async sizer that its limit held the instance
// back: it may raise it.
func (w *worker) noteAsyncHeld() {
	if a := w.t.d.Inst.AsyncSize; a != nil {
		a.Held.Store(true)
	}
}

// takeHold is what holds the worker back from starting another record.
type takeHold int

const (
	holdNone      takeHold = iota
	holdVersion            // its instance is of an old version and has records in progress
	holdOutputs            // the host holds outputs up to its soft mark (host.max_held_output_bytes)
	holdInstAsync          // its instance is at its bound on asynchronous operations
	holdHostAsync          // the host is at its bound on asynchronous operations
)

// canTake reports whether the worker may start another record on the
// instance it has now. It changes nothing: mayTake replaces an instance of
// an old version first.
func (w *worker) canTake() bool { return w.hold() == holdNone }

// hold reports what holds the worker back from starting another record, if
// anything. It changes nothing.
func (w *worker) hold() takeHold {
	if w.stale() {
		return holdVersion
	}
	if w.t.d.Budget.OverHeldOutputs() {
		return holdOutputs
	}
	if !w.t.d.Mods.Async.Load() {
		return holdNone // no async work: one record at a time
	}
	if w.instLimited() {
		return holdInstAsync
	}
	if w.t.d.Budget.OverAsync() {
		return holdHostAsync
	}
	return holdNone
}

// stale reports whether the worker's instance is of a version other than
// the one deployed.
func (w *worker) stale() bool { return w.ver != nil && w.ver != w.t.version() }

// mayTake is the worker's look before it starts records: an instance of an
// old version with nothing in progress is replaced first (upgradeIfStale),
// then canTake decides; the async sizer is told when the instance's own
// bound was what held it back.
func (w *worker) mayTake() bool {
	w.upgradeIfStale()
	h := w.hold()
	if h == holdInstAsync {
		w.noteAsyncHeld()
	}
	return h == holdNone
}

// upgradeIfStale replaces the instance of an old version once it has no
// record in progress (a dead one at once): the next record gets an instance
// of the current version. One with records in progress finishes them first
// (canTake is false meanwhile).
func (w *worker) upgradeIfStale() {
	if !w.stale() {
		return
	}
	if w.inst != nil && !w.inst.Dead() && w.inst.Pending() > 0 {
		return
	}
	w.upgrade()
}

// upgrade closes the worker's instance of an old version; the next record
// gets an instance of the current one.
func (w *worker) upgrade() {
	if w.inst != nil {
		w.inst.Close(context.Background())
		// A dead instance may still hold records it lost: they restart.
		for _, d := range w.inst.Poll(w.t.life.ctx, time.Now()) {
			w.outcome(d.Tag.(*job), d.Result)
		}
		w.inst = nil
	}
	if w.ver != nil {
		w.ver.Release()
		w.ver = nil
	}
}

// admit starts runnable records while the worker may (mayTake); it reports
// whether it started any, whether the host's bound on asynchronous
// operations refused one (the worker is then held back like !canTake), and whether the worker
// is to retire because the pool is above its instances: auto target (it
// is then counted off the task's workers already).
func (w *worker) admit() (took, refused, retire bool) {
	t := w.t
	w.freed.admitting = true
	defer func() {
		w.freed.admitting = false
		if len(w.freed.lanes) > 0 {
			t.mu.Lock()
			w.freeLanesLocked()
			t.mu.Unlock()
		}
	}()
	for w.mayTake() {
		async := t.d.Mods.Async.Load() // one value per pick: the admissions and their release pair up
		t.mu.Lock()
		w.freeLanesLocked()
		if t.q.stopping {
			t.mu.Unlock()
			return took, false, false
		}
		if t.overTargetLocked(w) {
			t.pool.workers--
			t.ps.Released.Add(1)
			t.mu.Unlock()
			return took, false, true
		}
		var got pickOutcome
		if t.d.Config.BatchRecords > 1 && (!async || !t.timersOn()) {
			// A run of records in one call (startRun: a stateful run's
			// records each read the writes of those before it that ended
			// ok). With timers, a synchronous module's run ends before a
			// record a timer would be due by (timersGate): a record's
			// firings run before the partition's next record (timers.go),
			// and a run's records are decided only after its call. Not an
			// asynchronous module's with timers: its records that end
			// pending are decided after the call, out of the gate's sight.
			got = w.takeRunLocked(async)
		} else {
			got = w.takeOneLocked(async)
		}
		switch got {
		case pickRefused:
			return took, true, false
		case pickNone:
			return took, false, false
		}
		took = true
	}
	return took, false, false
}

// pickOutcome is what one pick of admit came to.
type pickOutcome int

const (
	pickTook    pickOutcome = iota // records were started: pick again
	pickNone                       // nothing runnable
	pickRefused                    // the host's bound on asynchronous operations held it back
)

// takeRunLocked takes a run of records and runs them in one call
// (startRun). For an asynchronous module the run is no longer than the
// host's bound admits, nor than the single path would start on this
// instance before its own bound held it back (mayTake, record by record).
// Called with t.mu held; returns with it released.
func (w *worker) takeRunLocked(async bool) pickOutcome {
	t := w.t
	size, admitted := t.runSizeLocked(), 0
	if async {
		admitted = t.d.Budget.AdmitAsyncN(min(size, w.asyncRoom()))
		if admitted == 0 {
			t.mu.Unlock()
			return pickRefused
		}
		size = admitted
	}
	run := t.pickRunLocked(w.runs.run[:0], size)
	if async && len(run) < admitted {
		t.d.Budget.AdmittedN(admitted - len(run))
		admitted = len(run)
	}
	if len(run) == 0 {
		t.mu.Unlock()
		return pickNone
	}
	t.q.queued -= len(run)
	t.q.started += len(run)
	var next *kgo.Record
	if run[0].isWork() {
		next = t.laneNextLocked(run[0].ln)
	}
	t.dispatchLocked()
	t.mu.Unlock()
	if wk := run[0].w(); wk != nil {
		w.startWork(wk, run[0].ln, next) // work runs alone (pickRunLocked)
	} else {
		w.startRun(run, async)
	}
	t.d.Budget.AdmittedN(admitted) // the run's call returned: its operations are counted
	clear(run)
	w.runs.run = run[:0]
	return pickTook
}

// takeOneLocked takes one record and starts it (start). Called with t.mu
// held; returns with it released.
func (w *worker) takeOneLocked(async bool) pickOutcome {
	t := w.t
	if async && !t.d.Budget.AdmitAsync() {
		t.mu.Unlock()
		return pickRefused
	}
	u, ln := t.pickLocked()
	if u.none() {
		t.mu.Unlock()
		if async {
			t.d.Budget.Admitted()
		}
		return pickNone
	}
	t.q.queued--
	t.q.started++
	var next *kgo.Record
	if u.isWork() {
		next = t.laneNextLocked(ln)
	}
	t.dispatchLocked() // this worker comes back for more; others only if records keep waiting
	t.mu.Unlock()
	if wk := u.w(); wk != nil {
		w.startWork(wk, ln, next)
		if async {
			t.d.Budget.Admitted()
		}
		return pickTook
	}
	r := u.r
	if p := r.Offset + 1; p > t.position.Load() {
		t.position.Store(p)
	}
	j, forged := w.newJob(r, ln)
	w.place(j, forged)
	w.start(j)
	if async {
		t.d.Budget.Admitted()
	}
	return pickTook
}

// admitLanes are the lanes a worker's records free while it admits
// records (admit): noted, and freed with its next pick under the same
// task.mu. The worker's own: only its goroutine touches it.
type admitLanes struct {
	admitting bool
	lanes     []*lane
}

// note keeps ln to be freed with the next pick and reports true while the
// worker admits records; false: the caller frees ln now.
func (a *admitLanes) note(ln *lane) bool {
	if !a.admitting {
		return false
	}
	a.lanes = append(a.lanes, ln)
	return true
}

// freeLanesLocked frees the lanes noted while admit ran.
func (w *worker) freeLanesLocked() {
	for _, ln := range w.freed.lanes {
		w.t.releaseLocked(ln)
	}
	clear(w.freed.lanes)
	w.freed.lanes = w.freed.lanes[:0]
}

// poll delivers the instance's completions and expires its overdue records.
func (w *worker) poll() {
	if w.inst == nil || w.inst.Pending() == 0 {
		return
	}
	w.g.state.Store(WorkerBusy)
	for _, d := range w.inst.Poll(w.t.life.ctx, time.Now()) {
		w.outcome(d.Tag.(*job), d.Result)
	}
	w.accountCalls()
	w.settleState()
}

// accountCalls adds what the instance's calls waited for a core and ran
// since the last look to the task's totals (instances: auto measures them).
func (w *worker) accountCalls() {
	if w.t.pool.auto.sizer == nil || w.inst == nil {
		return
	}
	if w.calls.acctInst != w.inst {
		w.calls.acctInst, w.calls.acctWait, w.calls.acctRun = w.inst, 0, 0
	}
	wait, run := w.inst.CallTimes()
	if run == w.calls.acctRun {
		return
	}
	w.t.pool.auto.calls.Add(1)
	w.t.pool.auto.callWait.Add(int64(wait - w.calls.acctWait))
	w.t.pool.auto.callRun.Add(int64(run - w.calls.acctRun))
	w.calls.acctWait, w.calls.acctRun = wait, run
}

// startDueRetries starts the inline retries that are due, in due order,
// under the bounds on asynchronous operations a record taken alone meets
// (takeOneLocked): none while the instance is at async.max_in_flight
// (retryHold; a completion wakes the worker, nextWake), and each with a
// reservation under the host's bound. A retry is an attempt like any
// other, and it may start operations.
func (w *worker) startDueRetries() {
	w.retry.refused = false
	now := time.Now()
	for j := w.retry.due(now); j != nil; j = w.retry.due(now) {
		async := w.t.d.Mods.Async.Load()
		if async {
			if w.instLimited() {
				w.noteAsyncHeld()
				return
			}
			if !w.t.d.Budget.AdmitAsync() {
				w.retry.refused = true
				return
			}
		}
		w.retry.pop()
		w.start(j)
		if async {
			w.t.d.Budget.Admitted()
		}
	}
}

// retryHold is what holds the worker's inline retries back now: the
// instance's bound on asynchronous operations (holdInstAsync), the host's
// (holdHostAsync: over it, or it refused the worker's due retry this turn,
// the reservations of other workers' calls counted), or nothing
// (holdNone).
func (w *worker) retryHold() takeHold {
	switch {
	case !w.t.d.Mods.Async.Load():
		return holdNone
	case w.instLimited():
		return holdInstAsync
	case w.retry.refused || w.t.d.Budget.OverAsync():
		return holdHostAsync
	}
	return holdNone
}

// jobSlab is how many jobs newJob carves from one allocation. A slab lives
// until the last of its jobs is released: at most jobSlab-1 jobs' memory
// (~19 KiB) held past their time by a record that waits, against one
// allocation, one zeroing and one object for the collector to mark for a
// whole run instead of one a record.
const jobSlab = 64

// recSlab is how many second output records (outcome.second) one
// allocation holds: 63 records of 160 bytes and the allocation's 8-byte
// header fill Go's 10240-byte size class (64 would take the next).
const recSlab = 63
