package partition

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// JobObserver hands guest call and operation timings to the job's trace.
// An attempt's trace is begun lazily (RATIONALE.md, "Tracing"): its first
// call, when it returned without error, is left to the worker, which knows
// its times once the call returned (traceOwed); anything else noted while
// the attempt has no trace (an operation, a call that failed) begins it.
type JobObserver struct{}

func (JobObserver) GuestCall(tag any, export string, start time.Time, d time.Duration, err error) {
	j, ok := tracedJob(tag)
	if !ok {
		return
	}
	if j.tr == nil {
		if o := firstCallOwed(export); err == nil && o != 0 && j.owed&owedCall == 0 {
			j.owed |= o
			return
		}
		j.tr = j.t.beginTraceInCall(j)
	}
	j.tr.Call(export, start, d, err)
}

func (JobObserver) AsyncOp(tag any, kind abi.OpKind, desc string, start time.Time, d time.Duration, outcome string) {
	j, ok := tracedJob(tag)
	if !ok {
		return
	}
	if j.tr == nil {
		j.tr = j.t.beginTraceInCall(j)
	}
	j.tr.Op(kind.String(), desc, start, d, outcome)
}

// tracedJob is the attempt a host call's tag names, when it has a trace
// or its pipeline traces (then the caller may begin one).
func tracedJob(tag any) (*job, bool) {
	j, ok := tag.(*job)
	if !ok || (j.tr == nil && j.t.d.Hooks.Tracer == nil) {
		return nil, false
	}
	return j, true
}

// maxLostRestarts bounds how often a record is restarted because its
// instance was discarded while it waited (another record's fault) before
// that counts as its own failed attempt.
const maxLostRestarts = 3

// worker is one instance and the goroutine that owns it: every call into the
// instance, records and completions alike, is made from this goroutine.
type worker struct {
	t       *Task
	inst    *host.Instance
	ver     *version.Version // the version inst belongs to
	retries []*job           // inline retries waiting, by due time
	slot    int              // its index among the task's workers (a metrics label)
	retired bool             // counted off the task's workers when it retired (exit must not again)

	// retryRefused: the host's bound on asynchronous operations refused
	// the first due retry this turn (startDueRetries).
	retryRefused bool

	// Dispatch (dispatch.go). wake is this worker's own hand-off: a waker
	// takes the worker off task.idleW and sends here (buffer 1, never
	// blocks); lastUsed and keptUntil are the worker's own, read by
	// pushIdleLocked under task.mu while the worker is on task.idleW.
	wake      chan struct{}
	lastUsed  time.Time // when it last started a record or had one pending
	keptUntil time.Time // kept as part of the minimum: no idle check before

	// admit: while it runs, the lanes the worker's records free are noted
	// in freeLanes and freed with the next pick, under the same task.mu.
	admitting bool
	freeLanes []*lane

	// jobs is the rest of the worker's last slab of jobs (newJob): jobs are
	// carved from slabs of jobSlab, one allocation for that many records.
	jobs []job

	workerGauges // read by metrics from other goroutines
	workerCalls  // accountCalls' last look at its instance's call times
	workerRun    // the run of records in progress (startRun)
}

// workerGauges are a worker's figures, read by metrics from other
// goroutines.
type workerGauges struct {
	state   atomic.Int32 // workerIdle, workerBusy, workerAwaiting
	handled atomic.Int64 // records decided on this worker
	faults  atomic.Int64
	pages   atomic.Int64 // memory pages of its instance after its last call
}

// workerCalls is what accountCalls last read: the instance whose call
// times those were, and the times.
type workerCalls struct {
	acctInst          *host.Instance
	acctWait, acctRun time.Duration
	warm              bool // its first instance is created (counted in task.warm)
}

// workerRun is a worker's run of records (startRun). Its slices are
// reused, and cleared after each run so that none outlives it here. While
// records of the run in progress may go back to the queues (handback.go):
// its gate, and its number and records, guarded by task.mu; takeRun is
// gate.take, made once.
type workerRun struct {
	run       []picked
	runJobs   []*job
	runForged []int
	runRecs   []host.BatchRecord
	runRecAt  []abi.Record // what the guest sees of each record of the run (job.guestRecord)
	runOut    []host.Outcome
	runChecks []refusalCheck // a stateful run's sink checks (runAccepts)
	checked   *refusalCheck  // the check of the job decideRun decides now
	oneRec    abi.Record     // what the guest sees of a record run alone
	gate      runGate
	runGen    uint64
	// While a run's outcomes are decided (decideRun), settle notes the
	// decided jobs in settling and settleRun releases them together.
	deciding bool
	settling []*job
	runLanes []*lane
	running  []picked
	takeRun  func(int) bool
}

// Worker states, as metrics report them.
const (
	WorkerIdle     = 0 // no record in progress
	WorkerBusy     = 1 // in a call into its instance
	WorkerAwaiting = 2 // its records wait on asynchronous operations
)

var WorkerStates = [...]string{"idle", "busy", "awaiting_async"}

// settleState records the worker's state between calls.
func (w *worker) settleState() {
	st := int32(WorkerIdle)
	if w.inst != nil && w.inst.Pending() > 0 {
		st = WorkerAwaiting
	}
	w.state.Store(st)
	if w.inst != nil {
		w.pages.Store(int64(w.inst.MemoryPages()))
	}
}

// worker runs records on its own instance until the task stops (and its
// records waiting on asynchronous operations are decided) or, while the task
// is above its minimum, until it went instances.idle_timeout without a
// record (dispatch.go decides who takes records and who retires). Each turn
// of its loop (worker.turn) delivers completions, starts due retries and
// runnable records and, with nothing to start, waits: park decides how
// under task.mu, sleep waits, unpark undoes park and retires an idle worker.
func (t *Task) worker(borrowed bool) {
	defer t.wg.Done()
	w := t.newWorker()
	defer w.exit()
	if !borrowed {
		w.instance() // keep the minimum warm
	}
	l := newWorkerLoop(t.d.Config.Instances.IdleTimeout)
	defer l.stop()
	for t.ctx.Err() == nil && w.turn(l) {
	}
}

// newWorker makes a worker and adds it to the task's live workers.
func (t *Task) newWorker() *worker {
	w := &worker{t: t, wake: make(chan struct{}, 1), lastUsed: time.Now()}
	t.mu.Lock()
	w.slot = t.addWorkerLocked(w)
	t.mu.Unlock()
	return w
}

// exit gives back what the worker holds as its goroutine ends: its place
// among the task's workers (unless it retired, which counted it off), its
// instance (records still waiting on it are dropped: uncommitted), its
// version, its inline retries (dropped too) and its instance's budget
// (Budget.Retire when it retired).
func (w *worker) exit() {
	t := w.t
	t.mu.Lock()
	delete(t.live, w.slot)
	if !w.retired {
		t.workers--
	}
	t.mu.Unlock()
	if w.inst != nil {
		// Closing frees the instance's linear memory; nothing else
		// refers to it once the worker is gone from t.live.
		w.inst.Close(context.Background())
		for _, d := range w.inst.Poll(context.Background(), time.Now()) {
			t.drop(d.Tag.(*job)) // aborted: uncommitted
		}
		w.inst = nil
	}
	if w.ver != nil {
		w.ver.Release() // a replaced version closes with its last instance
		w.ver = nil
	}
	for _, j := range w.retries {
		t.drop(j)
	}
	if w.retired {
		t.d.Budget.Retire(t.d.InstanceBytes)
	} else {
		t.d.Budget.Release(t.d.InstanceBytes)
	}
	if w.warm {
		t.auto.warm.Add(-1)
	}
}

// workerLoop is what a worker's loop keeps across its turns: the timer of
// its next deadline, due retry or recheck, the timer of its idle timeout,
// and instances.idle_timeout as it was when the worker started.
type workerLoop struct {
	next, idle  *time.Timer
	idleTimeout time.Duration
}

func newWorkerLoop(idleTimeout time.Duration) *workerLoop {
	return &workerLoop{next: time.NewTimer(time.Hour), idle: time.NewTimer(time.Hour), idleTimeout: idleTimeout}
}

func (l *workerLoop) stop() {
	l.next.Stop()
	l.idle.Stop()
}

// turn is one round of the worker's loop: deliver the instance's
// completions, start due inline retries and runnable records, and, with
// nothing started, wait for the next thing to do. It reports false when the
// worker is to end: retired (above the task's target, or idle), or the task
// stopping with nothing of the worker's in progress.
func (w *worker) turn(l *workerLoop) bool {
	w.poll()
	w.startDueRetries()
	took, refused, retire := w.admit()
	if retire {
		w.retired = true // counted off by admit
		return false
	}
	pending := w.pending()
	if took || pending || len(w.retries) > 0 {
		w.lastUsed = time.Now() // not idle: records in progress or due
	}
	stopping := w.t.isStopping()
	if stopping {
		for _, j := range w.retries {
			w.t.drop(j) // stays uncommitted; the next owner starts it over
		}
		w.retries = nil
		if !pending {
			return false
		}
	}
	if took {
		return true
	}
	return w.wait(l, stopping, pending, refused)
}

// pending reports whether records of the worker's instance wait on
// asynchronous operations.
func (w *worker) pending() bool { return w.inst != nil && w.inst.Pending() > 0 }

// isStopping reports whether the task is stopping.
func (t *Task) isStopping() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopping
}

// workerWait is one wait of a worker: what wakes it, and how park listed it.
type workerWait struct {
	swapC   <-chan struct{}  // a new version deployed
	timerC  <-chan time.Time // its next deadline, due retry or recheck
	stopC   <-chan struct{}  // the task stopping (while waiting for work)
	idleC   <-chan time.Time // its idle timeout (while waiting for work)
	waiting bool             // on task.idleW
	blocked bool             // counted in task.blocked
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
	if len(w.retries) > 0 {
		hold = w.retryHold()
	}
	if hold == holdHostAsync {
		recheck = true
	}
	if len(w.retries) > 0 && hold == holdNone && (next.IsZero() || w.retries[0].due().Before(next)) {
		next = w.retries[0].due()
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
		t.pushIdleLocked(w)
		ww.waiting, ww.stopC = true, t.stopCh
		if !pending && len(w.retries) == 0 && l.idleTimeout > 0 {
			at := w.lastUsed.Add(l.idleTimeout)
			if at.Before(w.keptUntil) {
				at = w.keptUntil
			}
			l.idle.Reset(max(time.Until(at), 0))
			ww.idleC = l.idle.C
		}
	default:
		// Held back: records are for the other workers meanwhile.
		t.blocked++
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
	case <-w.wake:
	case <-ww.stopC:
	case <-ready:
	case <-ww.timerC:
	case <-ww.idleC:
		expired = true
	case <-w.t.ctx.Done():
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
		t.blocked--
	}
	onList := ww.waiting && t.removeIdleLocked(w)
	if expired && onList {
		if t.retireLocked(w) {
			w.retired = true
			t.mu.Unlock()
			return true
		}
		// Part of the minimum: stay, warm, and look again after another
		// idle_timeout.
		w.keptUntil = time.Now().Add(l.idleTimeout)
	}
	t.mu.Unlock()
	select {
	case <-w.wake:
	default:
	}
	if expired && onList && w.inst == nil {
		w.instance()
	}
	return false
}

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
	if a := w.t.d.AsyncSize; a != nil {
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
	if a := w.t.d.AsyncSize; a != nil {
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
		for _, d := range w.inst.Poll(w.t.ctx, time.Now()) {
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
	w.admitting = true
	defer func() {
		w.admitting = false
		if len(w.freeLanes) > 0 {
			t.mu.Lock()
			w.freeLanesLocked()
			t.mu.Unlock()
		}
	}()
	for w.mayTake() {
		async := t.d.Mods.Async.Load() // one value per pick: the admissions and their release pair up
		t.mu.Lock()
		w.freeLanesLocked()
		if t.stopping {
			t.mu.Unlock()
			return took, false, false
		}
		if t.overTargetLocked(w) {
			t.workers--
			t.ps.Released.Add(1)
			t.mu.Unlock()
			return took, false, true
		}
		var got pickOutcome
		if t.d.Config.BatchRecords > 1 {
			// A run of records in one call (startRun: a stateful run's
			// records each read the writes of those before it that ended
			// ok).
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
	run := t.pickRunLocked(w.run[:0], size)
	if async && len(run) < admitted {
		t.d.Budget.AdmittedN(admitted - len(run))
		admitted = len(run)
	}
	if len(run) == 0 {
		t.mu.Unlock()
		return pickNone
	}
	t.queued -= len(run)
	t.started += len(run)
	t.dispatchLocked()
	t.mu.Unlock()
	w.startRun(run, async)
	t.d.Budget.AdmittedN(admitted) // the run's call returned: its operations are counted
	clear(run)
	w.run = run[:0]
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
	r, ln := t.pickLocked()
	if r == nil {
		t.mu.Unlock()
		if async {
			t.d.Budget.Admitted()
		}
		return pickNone
	}
	t.queued--
	t.started++
	t.dispatchLocked() // this worker comes back for more; others only if records keep waiting
	t.mu.Unlock()
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

// freeLanesLocked frees the lanes noted while admit ran.
func (w *worker) freeLanesLocked() {
	for _, ln := range w.freeLanes {
		w.t.releaseLocked(ln)
	}
	clear(w.freeLanes)
	w.freeLanes = w.freeLanes[:0]
}

// poll delivers the instance's completions and expires its overdue records.
func (w *worker) poll() {
	if w.inst == nil || w.inst.Pending() == 0 {
		return
	}
	w.state.Store(WorkerBusy)
	for _, d := range w.inst.Poll(w.t.ctx, time.Now()) {
		w.outcome(d.Tag.(*job), d.Result)
	}
	w.accountCalls()
	w.settleState()
}

// accountCalls adds what the instance's calls waited for a core and ran
// since the last look to the task's totals (instances: auto measures them).
func (w *worker) accountCalls() {
	if w.t.auto.sizer == nil || w.inst == nil {
		return
	}
	if w.acctInst != w.inst {
		w.acctInst, w.acctWait, w.acctRun = w.inst, 0, 0
	}
	wait, run := w.inst.CallTimes()
	if run == w.acctRun {
		return
	}
	w.t.auto.calls.Add(1)
	w.t.auto.callWait.Add(int64(wait - w.acctWait))
	w.t.auto.callRun.Add(int64(run - w.acctRun))
	w.acctWait, w.acctRun = wait, run
}

// startDueRetries starts the inline retries that are due, in due order,
// under the bounds on asynchronous operations a record taken alone meets
// (takeOneLocked): none while the instance is at async.max_in_flight
// (retryHold; a completion wakes the worker, nextWake), and each with a
// reservation under the host's bound. A retry is an attempt like any
// other, and it may start operations.
func (w *worker) startDueRetries() {
	w.retryRefused = false
	now := time.Now()
	for len(w.retries) > 0 && !w.retries[0].due().After(now) {
		async := w.t.d.Mods.Async.Load()
		if async {
			if w.instLimited() {
				w.noteAsyncHeld()
				return
			}
			if !w.t.d.Budget.AdmitAsync() {
				w.retryRefused = true
				return
			}
		}
		j := w.retries[0]
		w.retries = w.retries[1:]
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
	case w.retryRefused || w.t.d.Budget.OverAsync():
		return holdHostAsync
	}
	return holdNone
}

// instance returns a live instance, replacing a dead one (after collecting
// the records it lost). Nil only when the task is aborted.
func (w *worker) instance() *host.Instance {
	backoff := 100 * time.Millisecond
	for w.inst == nil || w.inst.Dead() {
		if w.inst != nil {
			for _, d := range w.inst.Poll(w.t.ctx, time.Now()) {
				w.outcome(d.Tag.(*job), d.Result)
			}
		}
		if w.ver != nil {
			w.ver.Release()
			w.ver = nil
		}
		start := time.Now()
		v := w.t.version()
		v.Acquire()
		in, err := v.M.NewInstance(w.t.ctx)
		if err == nil {
			w.t.d.recordInstantiate(time.Since(start))
			in.KeepSlot()                  // records run back to back on it; the loop yields before it waits
			in.StopBatchAfterFailure(true) // nothing of a partition or key runs past a failed record (startRun)
			w.inst, w.ver = in, v
			if !w.warm {
				w.warm = true
				w.t.auto.warm.Add(1)
			}
			break
		}
		v.Release()
		w.t.d.Log.Error("cannot instantiate module; retrying", "err", err, "backoff", backoff)
		select {
		case <-w.t.ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	return w.inst
}

// newJob makes r's job, with nothing noted of it anywhere: place gives it
// its place in the release order (a record a run took and did not run is
// never placed, and is taken again later). forged is how many of r's
// headers are not believed.
func (w *worker) newJob(r *kgo.Record, ln *lane) (j *job, forged int) {
	t := w.t
	// The guest sees the record as it was first consumed, without
	// wasmstream's headers; on an input topic those are a producer's and
	// are not believed (role.prior).
	if t.rel != nil && t.rel.byOffset {
		j = t.rel.claim(r) // its place was reserved at enqueue
	} else {
		j = w.allocJob()
		j.r = r
	}
	j.t, j.ln = t, ln
	if _, ok := t.d.Role.(Primary); ok {
		// An input topic's record, the common case, without building
		// its prior state: attempt 1 at its own coordinates.
		j.attempt = 1
		return j, forgedHeaders(r)
	}
	prior, untrusted := t.d.Role.prior(r)
	j.attempt = int32(prior.Attempt) // at most failhdr.MaxAttempt
	if prior.Origin != ownOrigin(r) {
		o := prior.Origin        // declared here: escaping, it is an allocation
		j.rareFields().orig = &o // a retry topic's record: its origin is elsewhere
	}
	return j, untrusted
}

// jobSlab is how many jobs newJob carves from one allocation. A slab lives
// until the last of its jobs is released: at most jobSlab-1 jobs' memory
// (~19 KiB) held past their time by a record that waits, against one
// allocation, one zeroing and one object for the collector to mark for a
// whole run instead of one a record.
const jobSlab = 64

// allocJob is a zeroed job of the worker's slab; only the worker's
// goroutine calls it.
func (w *worker) allocJob() *job {
	if len(w.jobs) == 0 {
		w.jobs = make([]job, jobSlab)
	}
	j := &w.jobs[0]
	w.jobs = w.jobs[1:]
	return j
}

// origin is where j's record was first consumed: its own coordinates,
// unless it came from a retry topic.
func (j *job) origin() failhdr.Origin {
	if j.rare != nil && j.rare.orig != nil {
		return *j.rare.orig
	}
	return ownOrigin(j.r)
}

// guestRecord makes ar what the guest sees of j's record on its current
// attempt: the record as it was first consumed, without wasmstream's
// headers. It is made for each attempt into the worker's memory, not kept
// in the job (a job lives until its outputs are acknowledged: every byte
// of it is paid for on every record).
func (j *job) guestRecord(ar *abi.Record) {
	r, o := j.r, j.origin()
	*ar = abi.Record{
		Offset:    o.Offset,
		Timestamp: o.Timestamp,
		Partition: o.Partition,
		Topic:     o.Topic,
		Key:       r.Key,
		Value:     r.Value,
		Attempt:   uint32(j.attempt),
	}
	if len(r.Headers) > 0 {
		ar.Headers = make([]abi.Header, 0, len(r.Headers))
		for _, h := range r.Headers {
			if !strings.HasPrefix(h.Key, failhdr.Prefix) {
				ar.Headers = append(ar.Headers, abi.Header{Key: h.Key, Value: h.Value})
			}
		}
	}
}

// place notes j, about to run its first attempt (or dropped before it):
// its forged headers are counted, and it takes its place in the release
// order.
func (w *worker) place(j *job, forged int) {
	t := w.t
	if forged > 0 {
		t.d.Stats.ForgedHeaders.Add(int64(forged))
	}
	switch {
	case t.rel == nil, t.rel.byOffset: // placed at enqueue (releaser.reserve)
	case t.d.Config.Ordering == config.OrderPartition && j.ln != nil:
		t.rel.addLate(j)
	default:
		t.rel.add(j)
	}
}

// start runs an attempt of j.
func (w *worker) start(j *job) {
	in := w.instance()
	if in == nil {
		w.t.drop(j) // aborted: the record stays uncommitted
		return
	}
	w.prepare(j, in)
	w.state.Store(WorkerBusy)
	var res host.Result
	j.guestRecord(&w.oneRec)
	if ts := w.t.State; ts != nil {
		j.rs = ts.Begin() // a new attempt starts without the last one's writes
		res = in.ProcessState(w.t.ctx, &w.oneRec, j, j.rs)
	} else {
		res = in.Process(w.t.ctx, &w.oneRec, j)
	}
	w.oneRec = abi.Record{} // the record's memory is not the worker's to keep
	var end time.Time
	j.started, end = in.LastCall()
	w.outcomeAt(j, res, end)
	w.accountCalls()
	w.settleState()
}

// prepare readies j for an attempt on in. Its trace is begun when it is
// kept or notes an operation (decideTrace, jobObserver); one begun already
// (the next inline attempt, or one restarted) learns its instance.
func (w *worker) prepare(j *job, in *host.Instance) {
	j.pended, j.owed = false, 0
	j.tr.SetInstance(in.ID())
}

// startRun runs the records of run (pickRunLocked) on the worker's
// instance in one call (host.ProcessBatch): each keeps what start gives a
// record alone — its own attempt, trace, deadline and outcome, decided in
// offset order. The records the call did not run (a record before them
// faulted, failed or is to be retried, the guest returned early, or the
// task is being aborted) go back to the front of their queues, in order,
// and are taken again. Under ordering partition the run holds the
// partition's one lane: its last record run holds it on (while retried in
// place) or frees it as a record alone would.
// (RATIONALE.md, "Runs of records: what the engine takes in one pick".)
func (w *worker) startRun(run []picked, async bool) {
	t := w.t
	jobs, forged := w.runJobs[:0], w.runForged[:0]
	for _, p := range run {
		j, n := w.newJob(p.r, p.ln)
		jobs, forged = append(jobs, j), append(forged, n)
	}
	defer func() {
		clear(jobs)
		w.runJobs, w.runForged = jobs[:0], forged[:0]
	}()
	in := w.instance()
	if in == nil {
		w.dropRun(jobs, forged) // aborted: the records stay uncommitted
		return
	}
	recs, ars := w.runRecs[:0], slices.Grow(w.runRecAt[:0], len(jobs))[:len(jobs)]
	out := slices.Grow(w.runOut[:0], len(jobs))[:len(jobs)]
	for i, j := range jobs {
		w.prepare(j, in)
		j.guestRecord(&ars[i])
		recs = append(recs, host.BatchRecord{Rec: &ars[i], Tag: j})
	}
	if ts := t.State; ts != nil {
		w.beginStateRun(ts, jobs, recs, out)
		defer func() {
			clear(w.runChecks)
			w.runChecks, w.checked = w.runChecks[:0], nil
		}()
	}
	var ran int
	ran, run, jobs, forged = w.callRun(in, run, jobs, forged, recs, out, async)
	clear(recs)
	clear(ars) // the records' memory is not the worker's to keep
	w.runRecs, w.runRecAt = recs[:0], ars[:0]
	if t.State != nil {
		for i, j := range jobs {
			if i < ran {
				j.rs.EndRun()
			} else {
				j.rs = nil // not run: its next attempt begins its own
			}
		}
	}
	defer func() {
		clear(out)
		w.runOut = out[:0]
	}()
	if ran == 0 {
		w.dropRun(jobs, forged) // aborted before the call began: uncommitted
		return
	}
	w.afterRunCall(run, jobs, ran)
	w.decideRun(jobs[:ran], forged, out)
}

// callRun makes a run's one call into in (host.ProcessBatch) and reports
// how many records it ran, with the run, its jobs and their forged counts
// as kept: a synchronous module's run of more than one record runs behind
// the hand-back gate, which may give its tail to another worker.
func (w *worker) callRun(in *host.Instance, run []picked, jobs []*job, forged []int, recs []host.BatchRecord, out []host.Outcome, async bool) (int, []picked, []*job, []int) {
	t := w.t
	// An asynchronous module's run stops where the single path would stop
	// giving the instance records: at its bound on operations (instLimited),
	// however many operations its records started.
	if async {
		in.LimitBatchInFlight(w.asyncLimit())
	} else {
		in.LimitBatchInFlight(0)
	}
	w.state.Store(WorkerBusy)
	// An asynchronous module's run has no hand-back gate: its records'
	// calls start operations and return, and on a loaded core a run of
	// them outlasting runHandBack handed records back only to grow the
	// pool (TestPoolSettlesRealKafka).
	if len(run) <= 1 || !t.handsBack() || async {
		return in.ProcessBatch(t.ctx, recs, out), run, jobs, forged
	}
	if w.takeRun == nil {
		w.takeRun = w.gate.take
	}
	timer := w.armHandBack(run)
	in.GateBatch(w.takeRun)
	ran := in.ProcessBatch(t.ctx, recs, out)
	in.GateBatch(nil)
	// The records the timer gave back are another worker's now: their
	// jobs (never placed, and made again when taken) are left alone.
	kept := w.endHandBack(timer, run)
	return ran, run[:kept], jobs[:kept], forged[:kept]
}

// afterRunCall counts a run that carried several records, gives the
// partition's one lane (ordering partition) to the last record run, and
// puts the records the call did not run back at the front of their
// queues.
func (w *worker) afterRunCall(run []picked, jobs []*job, ran int) {
	t := w.t
	if ran > 1 {
		t.d.Stats.Runs.Add(1)
		t.d.Stats.RunRecords.Add(int64(ran))
	}
	if ln := run[0].ln; ln == &t.single {
		for _, j := range jobs {
			j.ln = nil
		}
		jobs[ran-1].ln = ln
	}
	if ran < len(run) {
		// Back before any outcome frees the partition's lane: the records
		// are runnable again as soon as it is free. Their jobs were never
		// placed; a job reserved at enqueue (releaser.claim) is taken again
		// with its record, and its next attempt's trace begins then.
		for _, j := range jobs[ran:] {
			j.tr = nil
		}
		t.mu.Lock()
		t.unpickLocked(run[ran:])
		t.mu.Unlock()
	}
}

// decideRun places the records a run ran, in offset order, then acts on
// each one's outcome.
func (w *worker) decideRun(jobs []*job, forged []int, out []host.Outcome) {
	t := w.t
	for i, j := range jobs {
		w.place(j, forged[i])
	}
	w.deciding = true
	for i, j := range jobs {
		if p := j.r.Offset + 1; p > t.position.Load() {
			t.position.Store(p)
		}
		j.started = out[i].Start
		w.checked = nil
		if i < len(w.runChecks) && w.runChecks[i].j == j {
			w.checked = &w.runChecks[i]
		}
		w.outcomeAt(j, out[i].Result, out[i].End)
	}
	w.checked = nil
	w.deciding = false
	w.settleRun()
	w.accountCalls()
	w.settleState()
}

// refusalCheck is what the sink said of a record of a stateful run whose
// writes a later record of the run read (runAccepts): succeeded takes the
// same answer, as the sink is asked once a record (TxnSink.refuses forgets
// a refused record once it told).
type refusalCheck struct {
	j   *job
	why string
}

// beginStateRun gives each record of a stateful run its attempt's state,
// reading through the writes of the records before it in the run that
// become the partition's (state.Record.After): record k+1 reads what it
// would read run alone after record k was decided, as the host does not
// chain the records' states (host.ProcessBatch). A record that ends
// pending is not among them (runAccepts): its writes stay its own until
// its completion decides it, as alone, where the next record starts while
// it waits; its continuations run after the call, after EndRun.
func (w *worker) beginStateRun(ts *state.Partition, jobs []*job, recs []host.BatchRecord, out []host.Outcome) {
	w.runChecks = slices.Grow(w.runChecks[:0], len(jobs))[:len(jobs)]
	for i, j := range jobs {
		j.rs = ts.Begin() // a new attempt starts without the last one's writes
		recs[i].State = j.rs
		if i > 0 {
			j.rs.After(func() []*state.Record {
				var prior []*state.Record
				for k := range i {
					if w.runAccepts(k, jobs[k], &out[k].Result) {
						prior = append(prior, jobs[k].rs)
					}
				}
				return prior
			})
		}
	}
}

// runAccepts reports whether record k of a stateful run, decided in the
// call in progress, succeeds as succeeded would decide it after the call:
// it ended ok and the sink takes its outputs and changelog records (asked
// once, kept in runChecks for succeeded).
func (w *worker) runAccepts(k int, j *job, res *host.Result) bool {
	if res.Status != abi.StatusOK || res.Fault() != nil {
		return false
	}
	c := &w.runChecks[k]
	if c.j != j {
		*c = refusalCheck{j: j, why: w.t.d.Sink.refuses(j.r, res.Outputs, j.rs.Writes())}
	}
	return c.why == ""
}

// dropRun places and drops every job of a run that did not begin.
func (w *worker) dropRun(jobs []*job, forged []int) {
	for i, j := range jobs {
		w.place(j, forged[i])
		w.t.drop(j)
	}
}

// outcome acts on what an attempt of j came to.
func (w *worker) outcome(j *job, res host.Result) { w.outcomeAt(j, res, time.Now()) }

// outcomeAt is outcome for an attempt whose last call ended at end: an
// attempt that waits goes on waiting (pending); one that faulted because of
// the host (canceled, its instance lost) is dropped or started over; the
// rest is a verdict — succeeded, retried in place, or failed.
func (w *worker) outcomeAt(j *job, res host.Result, end time.Time) {
	if res.Status == abi.StatusPending {
		w.beginTrace(j, end)
		w.waits(j)
		return
	}
	w.measure(j, &res, end)
	if f := res.Fault(); f != nil && w.hostFault(j, f) {
		return
	}
	if res.Status == abi.StatusOK {
		w.countVersion(j, &res, failure{})
		w.succeeded(j, &res, end)
		return
	}
	f := w.t.classify(&res)
	if j.rs != nil && j.rs.OverBound() != "" {
		// The guest saw a limit errno; the failure names the bound.
		f.msg += " (" + j.rs.OverBound() + ")"
	}
	w.countVersion(j, &res, f)
	if w.retryInline(j, f, end) {
		return
	}
	w.decideTrace(j, true, end)
	j.failed(f, false)
	j.rs = nil // a failed record leaves no state behind
	w.settle(j, verdictFailed)
}

// waits: j's attempt waits on asynchronous operations. Under ordering
// partition the partition's next record may start (pipelining): the
// release order keeps its outputs behind this one's (a record of a run
// takes its place here too, though the run's last record holds the lane).
func (w *worker) waits(j *job) {
	j.pended = true
	if w.t.d.Config.Ordering != config.OrderPartition {
		return
	}
	w.t.rel.placeLate(j)
	if j.ln != nil {
		w.releaseLane(j.ln)
		j.ln = nil
	}
}

// measure counts a decided attempt: its latency, the asynchronous
// controller's sample, the worker's records and faults.
func (w *worker) measure(j *job, res *host.Result, end time.Time) {
	t := w.t
	d := end.Sub(j.started)
	t.recordLatency(d)
	if j.pended && t.d.AsyncSize != nil {
		t.d.AsyncSize.Observe(end, d)
	}
	w.handled.Add(1)
	if res.Fault() != nil {
		w.faults.Add(1)
	}
}

// hostFault handles a fault that is not the record's doing and reports
// whether it did: an attempt canceled by a drain deadline is dropped
// (uncommitted, processed again by the next owner); one whose instance was
// discarded under it starts over on the replacement, keeping its attempt
// number and its place. Any other fault is counted and logged, and the
// record's verdict follows.
func (w *worker) hostFault(j *job, f *host.Fault) bool {
	t, r := w.t, j.r
	switch {
	case f.Kind == host.FaultCanceled:
		t.drop(j)
		return true
	case f.Kind == host.FaultInstanceLost && j.lost < maxLostRestarts:
		j.lost++
		t.ps.Restarted.Add(1)
		j.rareFields().due = time.Now()
		w.retries = slices.Insert(w.retries, 0, j)
		t.d.Log.Debug("record restarted: its instance was discarded while it waited", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
		return true
	}
	t.ps.Faults.Add(1)
	t.d.Log.Warn("guest fault", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "attempt", j.attempt, "kind", f.Kind, "instance_replaced", !f.Keep, "err", f.Msg)
	return false
}

// countVersion counts j's decided attempt against the version it ran on,
// for canaries: a failure is tallied by kind, and a canary's failed record
// is offered to the stable version (does it fail there too?).
func (w *worker) countVersion(j *job, res *host.Result, f failure) {
	if w.ver == nil {
		return
	}
	w.ver.Records.Add(1)
	if res.Status == abi.StatusOK {
		return
	}
	w.ver.Failed.Add(1)
	w.ver.Tally.Fail(f.kind, w.t.Topic, w.t.Partition)
	if c := w.t.d.Mods.Canary.Load(); c != nil && c.Ver == w.ver && c.Check != nil {
		var ar abi.Record
		j.guestRecord(&ar)
		c.Check.Offer(&ar, f.kind)
	}
}

// succeeded settles a record the guest decided ok: its state writes become
// the partition's (before its lane is freed) and go out as changelog
// records with its outputs; a produce the broker would refuse fails it now.
func (w *worker) succeeded(j *job, res *host.Result, end time.Time) {
	t, r := w.t, j.r
	var writes []state.Write
	if j.rs != nil {
		writes = j.rs.Writes()
	}
	var why string
	if c := w.checked; c != nil && c.j == j {
		why = c.why // asked while its run was in progress (runAccepts)
	} else {
		why = t.d.Sink.refuses(r, res.Outputs, writes)
	}
	w.checked = nil
	if why != "" {
		// A produce the broker refuses cannot succeed later: the record
		// fails now, its writes dropped with it.
		t.d.Budget.ReleaseOutputs(res.HeldBytes)
		w.decideTrace(j, true, end)
		j.failed(failure{hooks.KindProduce, why, false}, false)
		j.rs = nil
		w.settle(j, verdictFailed)
		return
	}
	w.decideTrace(j, false, end)
	if j.rs != nil {
		// Before the lane is freed: the next record of the key or
		// partition reads these writes (state.Partition.Commit).
		b, outs := t.State.Commit(r.Offset, j.rs)
		j.rs = nil
		if b != nil {
			j.sb = b
			res.Outputs = append(res.Outputs, outs...)
			t.d.Stats.StateWrites.Add(int64(len(outs)))
		}
	}
	if len(res.Outputs) == 0 {
		t.d.Budget.ReleaseOutputs(res.HeldBytes)
		w.settle(j, verdictDone)
		return
	}
	if len(res.Outputs) > 1 || j.tr != nil {
		// Here, before the sink and the producer's callbacks see j: the
		// records of its outputs after the first, a kept trace's
		// per-output callbacks (jobRare).
		j.rareFields()
	}
	j.outs, j.held = res.Outputs, res.HeldBytes
	w.settle(j, verdictOutputs)
}

// retryInline retries j in place (retry.mode: inline) when f may be
// retried and attempts remain, and reports whether it does: the record
// waits, holding its lane (its key, or its partition's release order) but
// not the instance, until its backoff is due.
func (w *worker) retryInline(j *job, f failure, end time.Time) bool {
	t := w.t
	rc := &t.d.Config.Retry
	if !f.retryable || int(j.attempt) >= rc.MaxAttempts || rc.Mode != config.RetryInline {
		return false
	}
	x := j.rareFields()
	x.history = append(x.history, historyEntry(f))
	delay, _ := t.d.Config.Delay(int(j.attempt) + 1)
	t.ps.Retried.Add(1)
	w.decideTrace(j, true, end)
	j.attempt++
	if j.tr != nil {
		j.tr.End("retry_inline", f.kind, f.msg)
		j.tr = j.tr.Next(t.traceInfo(j))
	}
	x.due = time.Now().Add(delay)
	i, _ := slices.BinarySearchFunc(w.retries, x.due, func(a *job, d time.Time) int { return a.due().Compare(d) })
	w.retries = slices.Insert(w.retries, i, j)
	return true
}

// recordLatency records an attempt's processing latency.
func (t *Task) recordLatency(d time.Duration) {
	if m := t.d.Hooks.Metrics; m != nil {
		m.Latency.Record(context.Background(), d.Seconds(), t.metricAttrs())
	}
}

func (t *Task) metricAttrs() metric.MeasurementOption {
	return metric.WithAttributeSet(t.mattrs)
}
