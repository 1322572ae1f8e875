package partition

// A worker's runs: the records it took become jobs, go into its instance
// in one call (host.ProcessBatch), and come out with their outcomes.

import (
	"slices"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/schemaio"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// allocJob is a zeroed job: one a done record's left (job.recycle), or
// else the worker's slab's next; only the worker's goroutine calls it.
func (w *worker) allocJob() *job {
	if j := spareJob(); j != nil {
		return j
	}
	if len(w.slabs.jobs) == 0 {
		w.slabs.jobs = make([]job, jobSlab)
	}
	j := &w.slabs.jobs[0]
	w.slabs.jobs = w.slabs.jobs[1:]
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
	w.g.state.Store(WorkerBusy)
	var res host.Result
	j.guestRecord(&w.runs.oneRec)
	var sb *schemaio.Buffer // the decoded key and value the call reads (Deps.Schema)
	if sc := w.t.d.Schema; sc != nil && sc.Decodes() {
		sb = sc.GetBuffer()
		if f, ok := w.decodeOne(sb, j, &w.runs.oneRec); !ok {
			w.runs.oneRec = abi.Record{}
			sc.PutBuffer(sb)
			w.schemaFailed(j, f)
			w.settleState()
			return
		}
	}
	if ts := w.t.State; ts != nil {
		j.rs = ts.Begin() // a new attempt starts without the last one's writes
		res = in.ProcessState(w.t.life.ctx, &w.runs.oneRec, j, j.rs)
	} else {
		res = in.Process(w.t.life.ctx, &w.runs.oneRec, j)
	}
	w.runs.oneRec = abi.Record{} // the record's memory is not the worker's to keep
	if sb != nil {
		w.t.d.Schema.PutBuffer(sb)
	}
	var end time.Time
	j.started, end = in.LastCall()
	w.outcomeAt(j, res, end)
	w.accountCalls()
	w.settleState()
}

// prepare readies j for an attempt on in. Its trace is begun when it is
// kept or notes an operation (decideTrace, jobObserver); one begun already
// (the next inline attempt, or one restarted) learns its instance.
func (w *worker) prepare(j *job, in Instance) {
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
	jobs, forged := w.runs.runJobs[:0], w.runs.runForged[:0]
	for _, p := range run {
		j, n := w.newJob(p.r, p.ln)
		jobs, forged = append(jobs, j), append(forged, n)
	}
	defer func() {
		clear(jobs)
		w.runs.runJobs, w.runs.runForged = jobs[:0], forged[:0]
	}()
	in := w.instance()
	if in == nil {
		w.dropRun(jobs, forged) // aborted: the records stay uncommitted
		return
	}
	recs, ars := w.runs.runRecs[:0], slices.Grow(w.runs.runRecAt[:0], len(jobs))[:len(jobs)]
	out := slices.Grow(w.runs.runOut[:0], len(jobs))[:len(jobs)]
	for i, j := range jobs {
		w.prepare(j, in)
		j.guestRecord(&ars[i])
		recs = append(recs, host.BatchRecord{Rec: &ars[i], Tag: j})
	}
	var sb *schemaio.Buffer // the decoded keys and values the call reads (Deps.Schema)
	if sc := t.d.Schema; sc != nil && sc.Decodes() {
		var keep int
		if sb, keep = w.decodeRunOrFail(sc, run, jobs, forged, recs, ars); keep == 0 {
			clear(ars)
			w.runs.runRecs, w.runs.runRecAt = recs[:0], ars[:0]
			return
		}
		run, jobs, forged, recs = run[:keep], jobs[:keep], forged[:keep], recs[:keep]
	}
	if ts := t.State; ts != nil {
		w.beginStateRun(ts, jobs, recs, out, async)
		defer func() {
			clear(w.runs.runChecks)
			w.runs.runChecks, w.runs.checked, w.runs.timed = w.runs.runChecks[:0], nil, nil
		}()
	}
	var ran int
	ran, run, jobs, forged = w.callRun(in, run, jobs, forged, recs, out, async)
	clear(recs)
	clear(ars) // the records' memory is not the worker's to keep
	w.runs.runRecs, w.runs.runRecAt = recs[:0], ars[:0]
	if sb != nil {
		t.d.Schema.PutBuffer(sb) // the call returned: nothing reads it
	}
	if t.State != nil {
		for i, j := range jobs {
			j.rs.EndRun() // the last to end makes the run the next one's (state.Run)
			if i >= ran {
				j.rs = nil // not run: its next attempt begins its own
			}
		}
	}
	defer func() {
		clear(out)
		w.runs.runOut = out[:0]
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
func (w *worker) callRun(in Instance, run []picked, jobs []*job, forged []int, recs []host.BatchRecord, out []host.Outcome, async bool) (int, []picked, []*job, []int) {
	t := w.t
	// An asynchronous module's run stops where the single path would stop
	// giving the instance records: at its bound on operations (instLimited),
	// however many operations its records started.
	if async {
		in.LimitBatchInFlight(w.asyncLimit())
	} else {
		in.LimitBatchInFlight(0)
	}
	w.g.state.Store(WorkerBusy)
	if w.runs.timed != nil && len(run) > 1 {
		// Timers (ordering partition, where nothing is handed back): the
		// run ends before a record a timer would be due by (timersGate).
		in.GateBatch(w.runs.timersGate)
		ran := in.ProcessBatch(t.life.ctx, recs, out)
		in.GateBatch(nil)
		return ran, run, jobs, forged
	}
	// An asynchronous module's run has no hand-back gate: its records'
	// calls start operations and return, and on a loaded core a run of
	// them outlasting runHandBack handed records back only to grow the
	// pool (TestPoolSettlesRealKafka).
	if len(run) <= 1 || !t.handsBack() || async {
		return in.ProcessBatch(t.life.ctx, recs, out), run, jobs, forged
	}
	if w.runs.takeRun == nil {
		w.runs.takeRun = w.runs.gate.take
	}
	timer := w.armHandBack(run)
	in.GateBatch(w.runs.takeRun)
	ran := in.ProcessBatch(t.life.ctx, recs, out)
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
	if ln := run[0].ln; ln == &t.q.single {
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
	w.runs.deciding = true
	for i, j := range jobs {
		if p := j.r.Offset + 1; p > t.position.Load() {
			t.position.Store(p)
		}
		j.started = out[i].Start
		w.runs.checked = nil
		if i < len(w.runs.runChecks) && w.runs.runChecks[i].j == j {
			w.runs.checked = &w.runs.runChecks[i]
		}
		w.outcomeAt(j, out[i].Result, out[i].End)
	}
	w.runs.checked = nil
	w.runs.deciding = false
	w.settleRun()
	w.accountCalls()
	w.settleState()
}

// refusalCheck is what the sink said of a record of a stateful run whose
// writes a later record of the run read (runAccepts): succeeded takes the
// same answer, as the sink is asked once a record (TxnSink.refuses forgets
// a refused record once it told).
type refusalCheck struct {
	j      *job
	why    string
	schema failure // its outputs did not encode (encodeOutputs): kind set
}

// beginStateRun gives each record of a stateful run its attempt's state,
// reading through the writes of the records before it in the run that
// become the partition's (state.Run): record k+1 reads what it would read
// run alone after record k was decided, as the host does not chain the
// records' states (host.ProcessBatch). A record that ends pending is not
// among them (runAccepts): its writes stay its own until its completion
// decides it, as alone, where the next record starts while it waits; its
// continuations run after the call, after EndRun. One function a run: the
// run asks it about each record once, in order.
//
// A synchronous module's record is decided as it ends: the records after
// it read its timestamp as stream time (state.Run.BeginAt). With timers
// the run is the gate's (timersGate, w.runs.timed).
func (w *worker) beginStateRun(ts *state.Partition, jobs []*job, recs []host.BatchRecord, out []host.Outcome, async bool) {
	w.runs.runChecks = slices.Grow(w.runs.runChecks[:0], len(jobs))[:len(jobs)]
	run := ts.BeginRun(func(k int) bool { return w.runAccepts(k, jobs[k], &out[k].Result) })
	for i, j := range jobs {
		// A new attempt starts without the last one's writes.
		if async {
			j.rs = run.Begin()
		} else {
			j.rs = run.BeginAt(j.r.Timestamp.UnixMilli()) // as CommitAt and Decided move it
		}
		recs[i].State = j.rs
	}
	if !async && w.t.timersOn() {
		w.runs.timed = run
		if w.runs.timersGate == nil {
			w.runs.timersGate = w.timersGate
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
	c := &w.runs.runChecks[k]
	if c.j != j {
		*c = refusalCheck{j: j, schema: w.encodeOutputs(res)}
		if c.schema.kind == "" {
			c.why = w.t.d.Sink.refuses(j.r, res.Outputs, j.rs.Writes())
		}
	}
	return c.why == "" && c.schema.kind == ""
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
	if j.isWork() {
		w.workOutcome(j, res, end) // work.go: not a record's outcome
		return
	}
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
	if j.pended && t.d.Inst.AsyncSize != nil {
		t.d.Inst.AsyncSize.Observe(end, d)
	}
	w.g.handled.Add(1)
	if res.Fault() != nil {
		w.g.faults.Add(1)
	}
}
