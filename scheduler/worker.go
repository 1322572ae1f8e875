package scheduler

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tracing"
)

// jobObserver hands guest call and operation timings to the job's trace.
type jobObserver struct{}

func (jobObserver) GuestCall(tag any, export string, start time.Time, d time.Duration, err error) {
	if j, ok := tag.(*job); ok {
		j.tr.Call(export, start, d, err)
	}
}

func (jobObserver) AsyncOp(tag any, kind abi.OpKind, desc string, start time.Time, d time.Duration, outcome string) {
	if j, ok := tag.(*job); ok {
		j.tr.Op(kind.String(), desc, start, d, outcome)
	}
}

// traceInfo describes j's current attempt for its trace.
func (t *task) traceInfo(j *job) tracing.Info {
	r := j.r
	info := tracing.Info{
		Pipeline: t.p.pc.Name, Group: t.p.group, Module: filepath.Base(t.p.pc.Module), ModuleDigest: t.version().m.Info().Digest,
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Attempt: j.attempt,
		OriginTopic: j.ar.Topic, OriginPartition: j.ar.Partition, OriginOffset: j.ar.Offset,
	}
	return info
}

// recordHeaders are a record's headers as tracing.Headers (a conversion,
// not an allocation).
type recordHeaders kgo.Record

func (r *recordHeaders) Header(k string) []byte {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == k {
			return r.Headers[i].Value
		}
	}
	return nil
}

// maxLostRestarts bounds how often a record is restarted because its
// instance was discarded while it waited (another record's fault) before
// that counts as its own failed attempt.
const maxLostRestarts = 3

// worker is one instance and the goroutine that owns it: every call into the
// instance, records and completions alike, is made from this goroutine.
type worker struct {
	t       *task
	inst    *host.Instance
	ver     *modVersion // the version inst belongs to
	retries []*job      // inline retries waiting, by due time
	slot    int         // its index among the task's workers (a metrics label)

	// Dispatch (dispatch.go). wake is this worker's own hand-off: a waker
	// takes the worker off task.idleW and sends here (buffer 1, never
	// blocks); lastUsed and keptUntil are the worker's own, read by
	// pushIdleLocked under task.mu while the worker is on task.idleW.
	wake      chan struct{}
	lastUsed  time.Time // when it last started a record or had one pending
	keptUntil time.Time // kept as part of the minimum: no idle check before

	// admit: while it runs, a lane the worker's records free is noted in
	// freeLane and freed with the next pick, under the same task.mu.
	admitting bool
	freeLane  *lane

	// Read by metrics from other goroutines.
	state   atomic.Int32 // workerIdle, workerBusy, workerAwaiting
	handled atomic.Int64 // records decided on this worker
	faults  atomic.Int64
	pages   atomic.Int64 // memory pages of its instance after its last call

	// accountCalls: the instance whose call times were last read, and
	// those times.
	acctInst          *host.Instance
	acctWait, acctRun time.Duration
	warm              bool // its first instance is created (counted in task.warm)
}

// Worker states, as metrics report them.
const (
	workerIdle     = 0 // no record in progress
	workerBusy     = 1 // in a call into its instance
	workerAwaiting = 2 // its records wait on asynchronous operations
)

var workerStates = [...]string{"idle", "busy", "awaiting_async"}

// settleState records the worker's state between calls.
func (w *worker) settleState() {
	st := int32(workerIdle)
	if w.inst != nil && w.inst.Pending() > 0 {
		st = workerAwaiting
	}
	w.state.Store(st)
	if w.inst != nil {
		w.pages.Store(int64(w.inst.MemoryPages()))
	}
}

// worker runs records on its own instance until the task stops (and its
// records waiting on asynchronous operations are decided) or, while the task
// is above its minimum, until it went instances.idle_timeout without a
// record (dispatch.go decides who takes records and who retires).
func (t *task) worker(borrowed bool) {
	defer t.wg.Done()
	w := &worker{t: t, wake: make(chan struct{}, 1), lastUsed: time.Now()}
	t.mu.Lock()
	w.slot = t.addWorkerLocked(w)
	t.mu.Unlock()
	retired := false
	defer func() {
		t.mu.Lock()
		delete(t.live, w.slot)
		if !retired {
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
			w.ver.release() // a replaced version closes with its last instance
			w.ver = nil
		}
		for _, j := range w.retries {
			t.drop(j)
		}
		t.p.budget.release(t.p.instanceBytes)
		if w.warm {
			t.auto.warm.Add(-1)
		}
	}()
	if !borrowed {
		w.instance() // keep the minimum warm
	}
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	idleTimeout := t.p.pc.Instances.IdleTimeout
	for {
		if t.ctx.Err() != nil {
			return
		}
		w.poll()
		w.startDueRetries()
		took, refused, retire := w.admit()
		if retire {
			retired = true // counted off by admit
			return
		}
		pending := w.inst != nil && w.inst.Pending() > 0
		if took || pending || len(w.retries) > 0 {
			w.lastUsed = time.Now() // not idle: records in progress or due
		}
		t.mu.Lock()
		stopping := t.stopping
		t.mu.Unlock()
		if stopping {
			for _, j := range w.retries {
				t.drop(j) // stays uncommitted; the next owner starts it over
			}
			w.retries = nil
			if !pending {
				return
			}
		}
		if took {
			continue
		}
		// Nothing to start: wait for work, a completion, a deadline or a due
		// retry.
		var next time.Time
		if pending {
			next = w.inst.NextDeadline()
		}
		if len(w.retries) > 0 && (next.IsZero() || w.retries[0].due.Before(next)) {
			next = w.retries[0].due
		}
		swapC := t.p.swapped()
		canTake := !refused && w.canTake()
		if !canTake && !w.instLimited() {
			// Held back by a host-wide bound (asynchronous operations,
			// held outputs): look again soon.
			if n := time.Now().Add(20 * time.Millisecond); next.IsZero() || n.Before(next) {
				next = n
			}
		}
		var timerC <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
			timerC = timer.C
		}
		var stopC <-chan struct{}
		var idleC <-chan time.Time
		waiting, blocked := false, false
		t.mu.Lock()
		switch {
		case stopping:
		case canTake:
			if t.runnableLocked() {
				t.mu.Unlock() // records came in since admit: take them
				continue
			}
			// Wait for work on the idle list, in order of last use.
			t.pushIdleLocked(w)
			waiting, stopC = true, t.stopCh
			if !pending && len(w.retries) == 0 && idleTimeout > 0 {
				at := w.lastUsed.Add(idleTimeout)
				if at.Before(w.keptUntil) {
					at = w.keptUntil
				}
				idle.Reset(max(time.Until(at), 0))
				idleC = idle.C
			}
		default:
			// Held back: records are for the other workers meanwhile.
			t.blocked++
			blocked = true
			t.dispatchLocked()
		}
		t.mu.Unlock()
		var ready <-chan struct{}
		if w.inst != nil {
			ready = w.inst.Ready()
			w.inst.Yield() // the core is for other workers while this one waits
		}
		expired := false
		select {
		case <-swapC:
		case <-w.wake:
		case <-stopC:
		case <-ready:
		case <-timerC:
		case <-idleC:
			expired = true
		case <-t.ctx.Done():
		}
		if timerC != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if idleC != nil && !expired && !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		if waiting || blocked {
			t.mu.Lock()
			if blocked {
				t.blocked--
			}
			// Off the list: a waker may have taken it off already, to hand
			// it records (its wake signal is then consumed below).
			onList := waiting && t.removeIdleLocked(w)
			if expired && onList {
				if t.retireLocked(w) {
					retired = true
					t.mu.Unlock()
					return
				}
				// Part of the minimum: stay, warm, and look again after
				// another idle_timeout.
				w.keptUntil = time.Now().Add(idleTimeout)
			}
			t.mu.Unlock()
			select {
			case <-w.wake:
			default:
			}
			if expired && onList && w.inst == nil {
				w.instance()
			}
		}
	}
}

// instLimited reports whether the instance's own bound on asynchronous
// operations holds it back.
func (w *worker) instLimited() bool {
	if w.inst == nil {
		return false
	}
	a := w.t.p.asyncSize
	if a == nil {
		return w.inst.AsyncInFlight() >= w.t.p.pc.Async.MaxInFlight
	}
	if w.inst.AsyncInFlight() < int(a.Limit.Load()) {
		return false
	}
	a.Held.Store(true) // the limit holds the instance back: the sizer may raise it
	return true
}

// canTake reports whether the worker may start another record: its instance
// is under its bound on asynchronous operations, and the host under its own.
func (w *worker) canTake() bool {
	if w.ver != nil && w.ver != w.t.version() {
		// A new version is deployed: finish what the old instance has in
		// progress, then replace it before taking new records.
		if w.inst != nil && !w.inst.Dead() && w.inst.Pending() > 0 {
			return false
		}
		w.upgrade()
	}
	if w.t.p.budget.overHeldOutputs() {
		return false // the host holds outputs up to its soft mark (host.max_held_output_bytes)
	}
	if !w.t.p.async.Load() {
		return true // no async work: one record at a time
	}
	return !w.instLimited() && !w.t.p.budget.overAsync()
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
		w.ver.release()
		w.ver = nil
	}
}

// admit starts runnable records while the worker may; it reports whether it
// started any, whether the host's bound on asynchronous operations refused
// one (the worker is then held back like !canTake), and whether the worker
// is to retire because the pool is above its instances: auto target (it
// is then counted off the task's workers already).
func (w *worker) admit() (took, refused, retire bool) {
	t := w.t
	w.admitting = true
	defer func() {
		w.admitting = false
		if ln := w.freeLane; ln != nil {
			w.freeLane = nil
			t.release(ln)
		}
	}()
	for w.canTake() {
		async := t.p.async.Load() // one value per record: admitAsync and admitted pair up
		t.mu.Lock()
		if ln := w.freeLane; ln != nil {
			w.freeLane = nil
			t.releaseLocked(ln)
		}
		if t.stopping {
			t.mu.Unlock()
			return took, false, false
		}
		if t.overTargetLocked(w) {
			t.workers--
			t.p.stats.Released.Add(1)
			t.ps.Released.Add(1)
			t.mu.Unlock()
			return took, false, true
		}
		if async && !t.p.budget.admitAsync() {
			t.mu.Unlock()
			return took, true, false
		}
		r, ln := t.pickLocked()
		if r == nil {
			t.mu.Unlock()
			if async {
				t.p.budget.admitted()
			}
			return took, false, false
		}
		t.queued--
		t.started++
		t.dispatchLocked() // this worker comes back for more; others only if records keep waiting
		t.mu.Unlock()
		if p := r.Offset + 1; p > t.position.Load() {
			t.position.Store(p)
		}
		took = true
		w.start(w.newJob(r, ln))
		if async {
			t.p.budget.admitted()
		}
	}
	return took, false, false
}

// poll delivers the instance's completions and expires its overdue records.
func (w *worker) poll() {
	if w.inst == nil || w.inst.Pending() == 0 {
		return
	}
	w.state.Store(workerBusy)
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

func (w *worker) startDueRetries() {
	now := time.Now()
	for len(w.retries) > 0 && !w.retries[0].due.After(now) {
		j := w.retries[0]
		w.retries = w.retries[1:]
		w.start(j)
	}
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
			w.ver.release()
			w.ver = nil
		}
		start := time.Now()
		v := w.t.version()
		v.acquire()
		in, err := v.m.NewInstance(w.t.ctx)
		if err == nil {
			w.t.p.recordInstantiate(time.Since(start))
			in.KeepSlot() // records run back to back on it; the loop yields before it waits
			w.inst, w.ver = in, v
			if !w.warm {
				w.warm = true
				w.t.auto.warm.Add(1)
			}
			break
		}
		v.release()
		w.t.p.log.Error("cannot instantiate module; retrying", "err", err, "backoff", backoff)
		select {
		case <-w.t.ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	return w.inst
}

func (w *worker) newJob(r *kgo.Record, ln *lane) *job {
	t := w.t
	// The guest sees the record as it was first consumed, without
	// wasmstream's headers; on an input topic those are a producer's and
	// are not believed (role.prior).
	prior, untrusted := t.p.role.prior(r)
	if untrusted > 0 {
		t.p.stats.ForgedHeaders.Add(int64(untrusted))
	}
	var j *job
	if t.rel != nil && t.rel.byOffset {
		j = t.rel.claim(r) // its place was reserved at enqueue
	} else {
		j = &job{r: r}
	}
	j.t, j.ln, j.attempt = t, ln, prior.Attempt
	o := prior.Origin
	j.ar = abi.Record{
		Offset:    o.Offset,
		Timestamp: o.Timestamp,
		Partition: o.Partition,
		Topic:     o.Topic,
		Key:       r.Key,
		Value:     r.Value,
	}
	if len(r.Headers) > 0 {
		j.ar.Headers = make([]abi.Header, 0, len(r.Headers))
		for _, h := range r.Headers {
			if !strings.HasPrefix(h.Key, HeaderPrefix) {
				j.ar.Headers = append(j.ar.Headers, abi.Header{Key: h.Key, Value: h.Value})
			}
		}
	}
	switch {
	case t.rel == nil, t.rel.byOffset:
	case t.p.pc.Ordering == config.OrderPartition && ln != nil:
		t.rel.addLate(j)
	default:
		t.rel.add(j)
	}
	return j
}

// start runs an attempt of j.
func (w *worker) start(j *job) {
	in := w.instance()
	if in == nil {
		w.t.drop(j) // aborted: the record stays uncommitted
		return
	}
	j.ar.Attempt = uint32(j.attempt)
	j.pended = false
	if t := w.t; t.p.tracer != nil {
		if j.tr == nil {
			j.tr = t.p.tracer.Begin(t.traceInfo(j), (*recordHeaders)(j.r))
		}
		j.tr.SetInstance(in.ID())
	}
	w.state.Store(workerBusy)
	var res host.Result
	if ts := w.t.state; ts != nil {
		j.rs = ts.begin() // a new attempt starts without the last one's writes
		res = in.ProcessState(w.t.ctx, &j.ar, j, j.rs)
	} else {
		res = in.Process(w.t.ctx, &j.ar, j)
	}
	var end time.Time
	j.started, end = in.LastCall()
	w.outcomeAt(j, res, end)
	w.accountCalls()
	w.settleState()
}

// outcome acts on what an attempt of j came to.
func (w *worker) outcome(j *job, res host.Result) { w.outcomeAt(j, res, time.Now()) }

// outcomeAt is outcome for an attempt whose last call ended at end.
func (w *worker) outcomeAt(j *job, res host.Result, end time.Time) {
	t := w.t
	r := j.r
	if res.Status != abi.StatusPending {
		d := end.Sub(j.started)
		t.recordLatency(d)
		if j.pended && t.p.asyncSize != nil {
			t.p.asyncSize.Observe(end, d)
		}
		w.handled.Add(1)
		if res.Fault() != nil {
			w.faults.Add(1)
		}
	}
	if res.Status == abi.StatusPending {
		j.pended = true
		if t.p.pc.Ordering == config.OrderPartition && j.ln != nil {
			// Pipelining: the partition's next record may start; the release
			// order keeps its outputs behind this one's.
			t.rel.placeLate(j)
			w.releaseLane(j.ln)
			j.ln = nil
		}
		return
	}
	if f := res.Fault(); f != nil {
		if f.Kind == host.FaultCanceled {
			t.drop(j) // aborted by a drain deadline: uncommitted, processed again by the next owner
			return
		}
		if f.Kind == host.FaultInstanceLost && j.lost < maxLostRestarts {
			// Not the record's fault: start it over on the replacement
			// instance, keeping its attempt number and its place.
			j.lost++
			t.p.stats.Restarted.Add(1)
			t.ps.Restarted.Add(1)
			j.due = time.Now()
			w.retries = slices.Insert(w.retries, 0, j)
			t.p.log.Debug("record restarted: its instance was discarded while it waited", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
			return
		}
		t.p.stats.Faults.Add(1)
		t.ps.Faults.Add(1)
		t.p.log.Warn("guest fault", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "attempt", j.attempt, "kind", f.Kind, "instance_replaced", !f.Keep, "err", f.Msg)
	}
	var f failure
	if res.Status != abi.StatusOK {
		f = t.classify(&res)
		if j.rs != nil && j.rs.overBound != "" {
			// The guest saw a limit errno; the failure names the bound.
			f.msg += " (" + j.rs.overBound + ")"
		}
	}
	if w.ver != nil { // the version the record ran on, for canaries
		w.ver.records.Add(1)
		if res.Status != abi.StatusOK {
			w.ver.failed.Add(1)
			w.ver.tally.fail(f.kind, t.topic, t.partition)
			if c := t.p.canary.Load(); c != nil && c.ver == w.ver && c.check != nil {
				c.check.offer(&j.ar, f.kind) // does the stable version fail it too?
			}
		}
	}
	if res.Status == abi.StatusOK {
		if why := t.refusedOutputs(j, res.Outputs); why != "" {
			// A produce the broker refuses cannot succeed later: the
			// record fails now, its writes dropped with it.
			t.p.budget.releaseOutputs(res.HeldBytes)
			j.tr.Decide(true)
			j.fail = failure{KindProduce, why, false}
			j.rs = nil
			w.settle(j, verdictFailed)
			return
		}
		j.tr.Decide(false)
		if j.rs != nil {
			// Before the lane is freed: the next record of the key or
			// partition reads these writes (state.go).
			b, outs := t.state.commitRecord(r.Offset, j.rs)
			j.rs = nil
			if b != nil {
				j.sb = b
				res.Outputs = append(res.Outputs, outs...)
				t.p.stats.StateWrites.Add(int64(len(outs)))
			}
		}
		if len(res.Outputs) == 0 {
			t.p.budget.releaseOutputs(res.HeldBytes)
			w.settle(j, verdictDone)
		} else {
			j.outs, j.held = res.Outputs, res.HeldBytes
			w.settle(j, verdictOutputs)
		}
		return
	}
	rc := &t.p.pc.Retry
	if f.retryable && j.attempt < rc.MaxAttempts && rc.Mode == config.RetryInline {
		// Inline: the record waits in place, holding its lane (its key, or
		// its partition's release order) but not the instance.
		j.history = append(j.history, historyEntry(f))
		delay, _ := t.p.pc.Delay(j.attempt + 1)
		t.p.stats.Retried.Add(1)
		t.ps.Retried.Add(1)
		j.attempt++
		if j.tr != nil {
			j.tr.Decide(true)
			j.tr.End("retry_inline", f.kind, f.msg)
			j.tr = j.tr.Next(t.traceInfo(j))
		}
		j.due = time.Now().Add(delay)
		i, _ := slices.BinarySearchFunc(w.retries, j.due, func(a *job, d time.Time) int { return a.due.Compare(d) })
		w.retries = slices.Insert(w.retries, i, j)
		return
	}
	j.tr.Decide(true)
	j.fail = f
	j.rs = nil // a failed record leaves no state behind
	w.settle(j, verdictFailed)
}
