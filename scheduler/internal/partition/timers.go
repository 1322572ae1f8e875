package partition

// Event-time timers (ABI.md §4.2, DESIGN.md "Timers: the firing path"):
// a due timer's firing is Work (work.go) whose call is the module's
// wasmstream_on_timer. When a record is decided (worker.settle), the
// partition's stream time has moved with it (state.Partition.CommitAt or
// Decided); if a timer is due, its firing is placed at the front of the
// partition's lane with After = that record, so it runs before the next
// record and, under exactly_once, its outputs and writes ride in the
// record's transaction. A round is a chain: each firing, decided, places
// the next due timer the same way before it is released, so the trigger
// stays held until the round ends, and a timer a firing sets within the
// round fires in it, in (at, key) order. Under at_least_once the
// trigger's finish (its offset's commit) waits for its round's firings to
// be durable (timerRound.holds).

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/tracing"
)

// HeaderTimerAt is the header of a timer's dead-letter record: the
// timer's at, in decimal milliseconds.
const HeaderTimerAt = "wasmstream.timer.at"

// firing is the timer a Work fires: the round's stream time T, and the
// record whose decision made it due (nil: a round of the task's start or
// of an idle partition, which no record triggered). Its Work and what its
// call is given (fr) are inside it: a firing is one allocation, not three
// (the Work, the firing, the abi.TimerFiring the call's argument escaped
// to), besides its Work.Done.
type firing struct {
	wk    Work
	fr    abi.TimerFiring
	timer state.Timer
	T     int64
	trig  *kgo.Record
}

// timerRound is a task's timers in progress. mu is a leaf but for the
// state view's lock, which it is taken before (nextFiring).
type timerRound struct {
	mu sync.Mutex
	// active: a firing is placed and not decided: the round in progress
	// fires what records decided meanwhile make due.
	active bool
	// holds are, under at_least_once, the triggers whose finish waits
	// for their round's firings; holding counts them, so a finish without
	// one costs one atomic load.
	holds   map[*kgo.Record]*timerHold
	holding atomic.Int32
	// timers.idle_advance (idle.go): the task's idle check, and when a
	// record was last decided or stream time last advanced by it (Unix
	// nanoseconds; atomic, not under mu: noteMoved is on the record path).
	idle  *time.Timer
	moved atomic.Int64
}

// timerHold is a trigger's round under at_least_once: its firings not yet
// durable, and whether the trigger itself finished meanwhile.
type timerHold struct {
	pending  int
	finished bool
}

// timersOn reports whether the task fires timers: it has state, a
// release order (ordering partition: the pipeline refuses timers
// elsewhere), and its module sets timers.
func (t *Task) timersOn() bool {
	return t.State != nil && t.rel != nil && (t.d.Timers || t.version().M.HasTimers())
}

// timersAfter is called as j is decided (worker.settle), before its
// release: a record's decision may make timers due, and a firing's
// decision goes on to the round's next due timer.
func (w *worker) timersAfter(j *job) {
	t := w.t
	if j.isWork() {
		if f := j.work().fire; f != nil && t.rel != nil {
			t.nextFiring(f.trig, true)
		}
		return
	}
	if t.timersOn() {
		w.noteMoved()
		t.nextFiring(j.r, false)
	}
}

// timersGate is the gate of a run with timers (callRun): it takes record
// k of the run unless a timer may be due once records 0..k-1 are decided
// (state.Run.TimerMayBeDue: the partition's earliest timer, or one the
// run's records set, at or before the stream time they raise). The run
// then ends before k; its records are decided, the due timers fire after
// its last one (timersAfter), and record k is taken in the next pick,
// after them: the single path's order, record for record and timer for
// timer, under exactly_once in the same transaction.
func (w *worker) timersGate(k int) bool { return !w.runs.timed.TimerMayBeDue(k) }

// timersAtStart fires what is due when the task starts: timers due by the
// stream time restored with the state, whose firing did not become
// durable before the partition's last owner stopped.
func (t *Task) timersAtStart() {
	if t.timersOn() {
		t.armIdle()
		t.nextFiring(nil, false)
	}
}

// nextFiring places the firing of the first timer due by the partition's
// stream time, triggered by trig: chained, as the next of a round (its
// firing just decided), else as a round's first unless one is in
// progress (it fires what is due when it looks next). A round ends when no
// timer is due; it looks again if stream time moved while it looked, so
// that a record decided meanwhile, which found the round active, is not
// left without its firings.
func (t *Task) nextFiring(trig *kgo.Record, chained bool) {
	tm := &t.rel.timers
	tm.mu.Lock()
	if tm.active && !chained {
		tm.mu.Unlock()
		return
	}
	tm.active = true
	tm.mu.Unlock()
	for {
		now := t.State.StreamTime()
		due, ok, err := t.State.DueFirst(now)
		if err != nil {
			t.d.Log.Error("cannot read the partition's timers; they fire after the next record", "topic", t.Topic, "partition", t.Partition, "err", err)
		}
		if ok && t.placeFiring(&firing{timer: due, T: now, trig: trig}) {
			return
		}
		tm.mu.Lock()
		if err != nil || ok || t.State.StreamTime() == now {
			tm.active = false
			tm.mu.Unlock()
			return
		}
		tm.mu.Unlock()
	}
}

// placeFiring places f's Work at the front of its lane (false: the task
// is stopping), holding its trigger's finish under at_least_once.
func (t *Task) placeFiring(f *firing) bool {
	hold := f.trig != nil && (t.rel == nil || !t.rel.byOffset)
	if hold {
		t.rel.timers.hold(f.trig)
	}
	f.wk = Work{Key: f.timer.Key, After: f.trig, fire: f, Done: func(err error) { t.firingDone(f, hold, err) }}
	if !t.PlaceWork(&f.wk, true) {
		return false // the task stops: the trigger is not finished
	}
	return true
}

// hold counts a firing of trig's round.
func (tm *timerRound) hold(trig *kgo.Record) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.holds == nil {
		tm.holds = map[*kgo.Record]*timerHold{}
	}
	h := tm.holds[trig]
	if h == nil {
		h = &timerHold{}
		tm.holds[trig] = h
		tm.holding.Add(1)
	}
	h.pending++
}

// holdFinish reports whether r's finish waits for its round's firings
// (they finish it, firingDone); it notes that r finished.
func (tm *timerRound) holdFinish(r *kgo.Record) bool {
	if tm.holding.Load() == 0 {
		return false
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	h := tm.holds[r]
	if h == nil {
		return false
	}
	h.finished = true
	return true
}

// firingDone is a firing's Work.Done: under at_least_once, its trigger
// finishes once the last of its round's firings is durable and it
// finished itself. A firing given up (the task stopped, its produce
// failed) leaves its trigger unfinished: the partition's next owner
// processes the trigger again, and the timer, whose delete did not
// become durable, fires again.
func (t *Task) firingDone(f *firing, held bool, err error) {
	if err != nil && !errors.Is(err, ErrWorkDropped) {
		t.d.Log.Error("a timer's firing could not be made durable; its trigger stays uncommitted", "topic", t.Topic, "partition", t.Partition, "at", f.timer.At, "err", err)
	}
	if !held {
		return
	}
	tm := &t.rel.timers
	tm.mu.Lock()
	h := tm.holds[f.trig]
	h.pending--
	finish := err == nil && h.pending == 0 && h.finished
	if h.pending == 0 && (finish || err != nil) {
		delete(tm.holds, f.trig)
		tm.holding.Add(-1)
	}
	tm.mu.Unlock()
	if finish {
		t.Finish(f.trig)
	}
}

// fire runs the firing f (job j) on the worker: a call of the module's
// wasmstream_on_timer, retried inline while it fails retryably (its
// attempt counting up, after the pipeline's retry backoff, up to
// retry.max_attempts), then dead-lettered. Its outcome goes the way of
// work (workOutcome): a success's outputs and changelog records, or the
// dead-letter record, leave through the sink in the partition's release
// order.
func (w *worker) fire(j *job, f *firing) {
	t := w.t
	var history []string
	for {
		in := w.instance()
		if in == nil {
			t.drop(j) // aborted: the round is the next owner's
			return
		}
		w.prepare(j, in)
		w.g.state.Store(WorkerBusy)
		rs := t.State.Begin()
		f.fr = abi.TimerFiring{At: f.timer.At, StreamTime: f.T, Partition: t.Partition, Attempt: uint32(j.attempt), Topic: t.Topic, Key: f.timer.Key}
		res := in.ProcessTimer(t.life.ctx, &f.fr, j, rs)
		start, end := in.LastCall()
		j.started = start
		w.accountCalls()
		if flt := res.Fault(); flt != nil && flt.Kind == host.FaultCanceled {
			t.d.Budget.ReleaseOutputs(res.HeldBytes)
			t.drop(j)
			return
		}
		failed := res.Status != abi.StatusOK || res.Err != nil
		var fl failure
		if failed {
			fl = t.classify(&res)
			if why := rs.OverBound(); why != "" {
				fl.msg += " (" + why + ")"
			}
		} else if why := t.firingRefused(f, rs, &res); why != "" {
			failed, fl = true, failure{hooks.KindProduce, why, false, 0}
		}
		w.traceFiring(j, f, fl, start, end)
		if !failed {
			res = t.firingSucceeded(j, f, rs, res)
		} else {
			t.d.Budget.ReleaseOutputs(res.HeldBytes)
			if fl.retryable && int(j.attempt) < t.d.Config.Retry.MaxAttempts && w.firingBackoff(int(j.attempt)) {
				history = append(history, historyEntry(fl))
				j.attempt++
				continue
			}
			res = t.firingDeadLettered(j, f, fl, history)
		}
		w.workOutcome(j, res, end)
		w.settleState()
		return
	}
}

// firingBackoff waits the retry backoff before attempt+1 of a firing
// (false: the task stopped meanwhile). The worker waits: the partition's
// next record runs after the firing, as after a record retried inline.
func (w *worker) firingBackoff(attempt int) bool {
	var d time.Duration
	if len(w.t.d.Config.Retry.Backoff) > 0 {
		d, _ = w.t.d.Config.Delay(attempt + 1)
	}
	w.inst.Yield()
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-w.t.life.ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// firingRefused is why a topic would refuse an output or changelog record
// of the firing ("": none would), its own timer's delete among them.
func (t *Task) firingRefused(f *firing, rs *state.Record, res *host.Result) string {
	rs.DeleteTimer(f.timer.Key, f.timer.At) // the host's write: not in the guest's bounds
	return t.d.Sink.refuses(nil, res.Outputs, rs.Writes())
}

// firingOffset is the offset a firing's state batch is flushed with: its
// trigger's (the batch commits with it), or for a round no record
// triggered, the partition's committed offset, which only a later
// record's commit passes.
func (t *Task) firingOffset(f *firing) int64 {
	if f.trig != nil {
		return f.trig.Offset
	}
	return max(t.Committed.Load(), 0)
}

// firingSucceeded commits a succeeded firing's writes (its timer's delete
// among them) into the partition's overlay, where the next firing and
// record read them, and returns its outputs with their changelog records.
func (t *Task) firingSucceeded(j *job, f *firing, rs *state.Record, res host.Result) host.Result {
	n := len(res.Outputs)
	b, outs := t.State.CommitAt(t.firingOffset(f), f.T, rs, res.Outputs)
	j.sb = b
	t.d.Stats.StateWrites.Add(int64(len(outs) - n))
	t.d.Stats.TimersFired.Add(1)
	return host.Result{Status: abi.StatusOK, Outputs: outs, HeldBytes: res.HeldBytes}
}

// firingDeadLettered is a firing that failed terminally: its outputs and
// writes dropped, its timer deleted, and a dead-letter record with the
// timer's key, a null value, the timer's at (HeaderTimerAt) and the
// failure headers as its one output.
func (t *Task) firingDeadLettered(j *job, f *firing, fl failure, history []string) host.Result {
	rs := t.State.Begin()
	rs.DeleteTimer(f.timer.Key, f.timer.At)
	attempt := int(j.attempt)
	r := &kgo.Record{Topic: t.Topic, Partition: t.Partition, Offset: -1, Key: f.timer.Key}
	hs := t.failureHeaders(r, attempt, attempt, fl, history)
	out := abi.Output{Topic: t.d.Config.DeadLetterTopic, Partition: -1, Key: f.timer.Key,
		Headers: make([]abi.Header, 0, len(hs)+1)}
	for _, h := range hs {
		out.Headers = append(out.Headers, abi.Header{Key: h.Key, Value: h.Value})
	}
	out.Headers = append(out.Headers, abi.Header{Key: HeaderTimerAt, Value: strconv.AppendInt(nil, f.timer.At, 10)})
	t.d.Log.Warn("a timer's firing failed; its timer is deleted and a dead-letter record written", "topic", t.Topic, "partition", t.Partition, "at", f.timer.At, "kind", fl.kind, "err", fl.msg, "attempt", attempt)
	b, outs := t.State.CommitAt(t.firingOffset(f), f.T, rs, []abi.Output{out})
	j.sb = b
	t.d.Stats.TimersFailed.Add(1)
	return host.Result{Status: abi.StatusOK, Outputs: outs}
}

// traceFiring traces an attempt of a firing by tracing's rule (sampled,
// or always when it failed): a span of its own, with its call.
func (w *worker) traceFiring(j *job, f *firing, fl failure, start, end time.Time) {
	tr := w.t.d.Hooks.Tracer
	failed := fl.kind != ""
	p, keep := tr.Keep(failed, int(j.attempt), tracing.HeaderFunc(func(string) []byte { return nil }))
	if !keep {
		return
	}
	t := w.t
	info := tracing.Info{Pipeline: t.d.Config.Name, Group: t.d.Group, ModuleDigest: t.version().M.Info().Digest,
		Topic: t.Topic, Partition: t.Partition, Offset: -1, Key: f.timer.Key, Attempt: int(j.attempt), Instance: w.inst.ID()}
	if f.trig != nil {
		info.Offset = f.trig.Offset
	}
	a := tr.BeginKept(info, p, start)
	var err error
	if failed {
		err = errors.New(fl.msg)
	}
	a.Call(abi.ExportOnTimer, start, end.Sub(start), err)
	a.Decide(failed)
	outcome := "timer fired"
	if failed {
		outcome = "timer failed"
	}
	a.End(outcome, fl.kind, fl.msg)
}
