package partition

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// maxLostRestarts bounds how often a record is restarted because its
// instance was discarded while it waited (another record's fault) before
// that counts as its own failed attempt.
const maxLostRestarts = 3

// worker is one instance and the goroutine that owns it: every call into the
// instance, records and completions alike, is made from this goroutine.
type worker struct {
	t       *Task
	inst    Instance
	ver     *version.Version // the version inst belongs to
	retry   retryQueue       // inline retries waiting (worker_retry.go)
	slot    int              // its index among the task's workers (a metrics label)
	retired bool             // counted off the task's workers when it retired (exit must not again)

	idle idleEntry // how it waits on the task's idle list (worker_wait.go)

	freed admitLanes // the lanes freed while it admits records (worker_admit.go)

	slabs workerSlabs // what its records' jobs are carved from

	g     workerGauges // read by metrics from other goroutines
	calls workerCalls  // accountCalls' last look at its instance's call times
	runs  workerRun    // the run of records in progress (startRun)
}

// workerSlabs are the rest of a worker's last slabs: jobs are carved from
// slabs of jobSlab (newJob), the records of second outputs
// (outcome.second) from slabs of recSlab (outputRecords), one allocation
// for that many records. Only the worker's goroutine carves.
type workerSlabs struct {
	jobs []job
	recs []kgo.Record
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
	acctInst          Instance
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
	// timed is the state run of a run with timers, which its gate asks
	// (timersGate, made once) before each record.
	timed      *state.Run
	timersGate func(int) bool
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
	w.g.state.Store(st)
	if w.inst != nil {
		w.g.pages.Store(int64(w.inst.MemoryPages()))
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
	defer t.life.wg.Done()
	w := t.newWorker()
	defer w.exit()
	if !borrowed {
		w.instance() // keep the minimum warm
	}
	l := newWorkerLoop(t.d.Config.Instances.IdleTimeout)
	defer l.stop()
	for t.life.ctx.Err() == nil && w.turn(l) {
	}
}

// newWorker makes a worker and adds it to the task's live workers.
func (t *Task) newWorker() *worker {
	w := &worker{t: t, idle: idleEntry{wake: make(chan struct{}, 1), lastUsed: time.Now()}}
	t.mu.Lock()
	w.slot = t.pool.add(w)
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
	delete(t.pool.live, w.slot)
	if !w.retired {
		t.pool.workers--
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
	for _, j := range w.retry.take() {
		t.drop(j)
	}
	if w.retired {
		t.d.Budget.Retire(t.d.Inst.Bytes)
	} else {
		t.d.Budget.Release(t.d.Inst.Bytes)
	}
	if w.calls.warm {
		t.pool.auto.warm.Add(-1)
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
	if took || pending || w.retry.len() > 0 {
		w.idle.lastUsed = time.Now() // not idle: records in progress or due
	}
	stopping := w.t.isStopping()
	if stopping {
		for _, j := range w.retry.take() {
			w.t.drop(j) // stays uncommitted; the next owner starts it over
		}
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
	return t.q.stopping
}
