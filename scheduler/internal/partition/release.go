// The release step of a record's path (DESIGN.md): a worker decides a
// record's outcome (its verdict) and settles its job; the job waits for its
// turn in the partition's release order where one is kept, then the
// pipeline's sink (sink.go) produces what it carries.

package partition

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/scheduler/internal/fifo"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/tracing"
)

// job is one record's hand-off from a worker to its release: it carries
// the record across its inline attempts, then its verdict — what its outcome
// releases — through the partition's release order (releaser) to the
// producer, and is the Context of its output records, so that one static
// callback (outputAcked) finds it when the broker answers. One allocation
// (a slab's share: allocJob) carries a record from its first call to its
// last acknowledgement; what most records never need is in jobRare, made
// only for the records that do.
type job struct {
	t    *Task
	r    *kgo.Record
	ln   *lane            // held until the record is decided (key ordering) or has started (partition)
	tr   *tracing.Attempt // the current attempt's trace: nil until begun (trace.go)
	rs   *state.Record    // the current attempt's state writes (state.enabled)
	sb   *state.Batch     // its writes once it succeeded, tied to their changelog produces
	rare *jobRare         // nil until a record needs one of its fields (jobRare)

	started time.Time // the current attempt's first call
	attempt int32     // 1 to failhdr.MaxAttempt
	lost    uint8     // restarts after its instance was discarded under it (at most maxLostRestarts)
	pended  bool      // the current attempt waited on asynchronous operations
	owed    traceOwed // what the current attempt's trace is still to be told (tracing on)

	remaining atomic.Int32 // the sink: answers for its outputs still awaited (a TxnSink's: and its release)

	release jobRelease // set by settle, acted on by the sink

	outcome outcome // its outputs and their produces (the sink)
}

// jobRelease is how a job is released: its place in the partition's
// release order and the verdict its outcome releases, set by settle and
// acted on by the sink. settled is guarded by releaser.mu when the job is
// ordered.
type jobRelease struct {
	ordered bool    // it has a place in the partition's release order
	late    bool    // ordered, but placed only when it settles or frees its lane (releaser.addLate)
	settled bool    // its verdict is set
	verdict verdict // what its outcome releases
}

// A job is 312 bytes, against 448 with jobRare's fields inline: one is
// made for every record, from a worker's slab of jobSlab, and a slab of
// 312-byte jobs with its allocation's 8-byte header fills Go's 20480-byte
// size class, 320 bytes a record (448-byte jobs took the 32768-byte class:
// 512 a record). One field more and the slab takes the next class
// (TestJobSize, TestNewJobOneAllocation): its small fields are packed
// (lost in a byte) so that the second output's pointer fits. What stays in
// it is what every record, or every record of a common mode, uses: its
// trace and its state (rs, sb: every record of a stateful pipeline), the
// first output's record and where the second's is, and what the producer's
// callbacks write (remaining, failedErr).

// jobRare is what few records need of a job: a retry topic's origin, inline
// retries, a failure, more than two outputs, a kept trace's produces. It is
// made once a record needs it (job.rareFields), always by the goroutine
// that owns the job then and before the job reaches any other: the worker
// that decides it (newJob, retryInline, hostFault, a failed verdict,
// succeeded for several outputs or a trace), or the background goroutine
// an undeliverable record is failed on, once every produce of it was
// answered — never a producer's callback while produces of it are in
// flight. Once made it stays: a job's fields are read through it from the
// sink and the producer's callbacks, ordered after its making by the
// release (releaser.mu, the sink's delivery).
type jobRare struct {
	orig    *failhdr.Origin // where the record was first consumed, when not the record itself (a retry topic's)
	history []string        // inline retries
	due     time.Time       // when an inline retry (or a restart) is due
	fail    failure         // verdictFailed: why

	// work is what the job carries when it is not a record (work.go: its
	// r is nil), and at its order in a release order reserved by offset
	// (releaser.insertBefore): the offset of the record it was placed
	// before.
	work  *Work
	at    int64
	after *job // the job of the record that triggered the work (Work.After), held until it settles

	// Producing the outputs (the sink): the records of the outputs
	// after the first when there are more than two (two: outcome.second),
	// and the trace's per-output callbacks (a kept trace).
	extra []*kgo.Record
	sent  []func(int32, int64, error)
}

// spareJobs are jobs whose record is done and that nothing holds any more
// (job.recycle), for the next record of any partition: allocJob and
// reserve take one before a slab's share or a new one. A job lives from
// its record's first call to its last acknowledgement; taken back then,
// the next records' jobs allocate nothing (a job, its slab's 320 bytes,
// was a third of what a stateless record allocated beyond franz-go's own).
// A sync.Pool gives back to the collector what the next records did not
// take.
var spareJobs sync.Pool

// spareJob is a zeroed job recycle gave back, or nil.
func spareJob() *job {
	j, _ := spareJobs.Get().(*job)
	return j
}

// recycle gives j, whose record is done (finished, its trace ended), to
// the next record, unless something may still read it. Its callers are the
// points where a job's life ends and nothing else holds it:
//
//   - a PlainSink's last answer for its outputs, all acknowledged
//     (outputAcked): franz-go reads none of a record after calling its
//     promise, and the release order, the worker and the lane let go of
//     the job when they delivered it;
//   - a TxnSink's last of its outputs' answers and its release
//     (txnAnswered), without a produce error;
//   - a record that succeeded without outputs (Task.filtered).
//
// A job with a jobRare is left to the collector: a failure (its copy is
// produced on the background), work (its Work, the trigger it was placed
// after), a kept trace (its per-output callbacks), more than two outputs.
// So is a job whose trace was begun. A job that ends any other way — dropped,
// cut off, handed back, abandoned with its task — is not given back
// either: those endings are rare, and each has holders of its own.
// Anything that reads a job after one of these points must not exist
// (DESIGN.md, "Things that will bite you").
func (j *job) recycle() {
	if j.rare != nil || j.tr != nil {
		return
	}
	*j = job{}
	spareJobs.Put(j)
}

// rareFields is j's jobRare, made if j has none yet. Only the goroutine
// that owns j calls it (jobRare).
func (j *job) rareFields() *jobRare {
	if j.rare == nil {
		j.rare = new(jobRare)
	}
	return j.rare
}

// due is when j's inline retry is due (retryInline, hostFault: j is on
// the worker's retries, so it has a jobRare).
func (j *job) due() time.Time { return j.rare.due }

// failed sets j's failure, without inline history when clearHistory (the
// failure is not its attempt's: an output could not be produced).
func (j *job) failed(f failure, clearHistory bool) {
	x := j.rareFields()
	x.fail = f
	if clearHistory {
		x.history = nil
	}
}

// outcome is the release half of a job: what a decided record releases,
// and what the sink needs to produce it. Embedded in the job, so that one
// allocation still carries a record from its first call to its last
// acknowledgement.
type outcome struct {
	// second is the record of the second of exactly two outputs (a
	// stateful record's output and its changelog record: the count
	// example's), from its state batch (state.Batch.ProduceRoom, used
	// again after the flush), or else the worker's slab of records
	// (worker.outputRecords): no jobRare, and at most a slab's share of an
	// allocation, on its way to the sink. Kept across attempts.
	second *kgo.Record

	outs []abi.Output // verdictOutputs: the guest's outputs, then its changelog records
	held int64        // output bytes it holds in the host's account until acknowledged

	// Producing the outputs (the sink): one record embedded for the
	// common single output (second for a second one; the others in
	// jobRare), and the first produce error; job.remaining counts the
	// acknowledgements still awaited.
	out1      kgo.Record
	failedErr atomic.Pointer[error]
	one       [1]*job // the run of one it is delivered as without a release order (job.run)
}

// verdict is what a decided attempt releases.
type verdict uint8

const (
	verdictNone    verdict = iota // dropped: nothing; the record stays uncommitted
	verdictDone                   // succeeded without outputs: done at once
	verdictOutputs                // succeeded: done once its outputs are acknowledged
	verdictFailed                 // failed: done once its retry or dead-letter copy is acknowledged
)

// A job is its output records' Context (kgo.Record.Context): no deadline,
// no cancellation, no values.
func (*job) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*job) Done() <-chan struct{}       { return nil }
func (*job) Err() error                  { return nil }
func (*job) Value(any) any               { return nil }

// releaser keeps a partition's release order: under ordering partition
// (and every ordering under exactly_once), what a record's outcome produces
// is released in offset order even when asynchronous completions decide
// records out of order, and delivered once it and every job before it are
// settled.
//
// Places are taken in one of two ways. Under exactly_once (byOffset) every
// record takes its place when the poll loop enqueues it (reserve), in
// offset order, and the worker that picks it makes its job in that place
// (claim): with a pool of instances
// or ordering key, records are picked out of offset order (a key's lane
// holds its next record back while later ones of other keys run) and two
// workers reach the releaser in either order after their picks, so a place
// taken at the pick let a later record's outputs into a transaction whose
// committed offset stopped below it — processed again, and produced twice,
// by whoever resumed from that offset (TestExactlyOnceRebalance). Under
// ordering partition with offset commits a job holds the partition's one
// lane from its start until it settles or goes pending, so no other job can
// take a place meanwhile: it takes its place then (addLate), in the same
// lock as its settling, and no lock is taken at enqueue or pick.
type releaser struct {
	mu       sync.Mutex
	q        fifo.Queue[place]
	byOffset bool        // places are reserved at enqueue (exactly_once)
	sk       Sink        // where settled heads are delivered, as one run
	run      []*job      // the run being delivered (reused: guarded by mu)
	gone     func(int64) // set by abandon: gives back the held bytes of later settles
	// timers are the task's timer firings in progress (timers.go): a
	// round and the triggers it holds back are a matter of release, and
	// timers fire only where a release order is kept (ordering
	// partition).
	timers timerRound
}

// place is one place in a release order: a job's, or a record's reserved
// at enqueue (releaser.reserve), whose job is made when a worker claims
// it. A reserved place holds no job until then: the poll loop reserves a
// whole poll's records at once (under exactly_once, tens of thousands a
// partition when small records come compressed), and a job made for each
// then was one allocation a record, where one claimed is a done record's
// (job.recycle).
type place struct {
	r *kgo.Record // the record whose place it is; nil: work's
	j *job        // its job; nil until claimed (a reserved record's place)
}

// order is where p sorts in a release order reserved by offset (job.order).
func (p *place) order() int64 {
	if p.j != nil {
		return p.j.order()
	}
	return p.r.Offset
}

// settled reports whether p's job has its verdict set.
func (p *place) settled() bool { return p.j != nil && p.j.release.settled }

// work reports whether p is work's (work.go).
func (p *place) work() bool { return p.j != nil && p.j.isWork() }

// jobOf returns the job of p, a record's place, made now from alloc when
// it has none yet.
func (p *place) jobOf(alloc func() *job) *job {
	if p.j == nil {
		p.j = orderedJob(alloc(), p.r)
	}
	return p.j
}

// orderedJob makes j, blank, the job of r with a place in a release order.
func orderedJob(j *job, r *kgo.Record) *job {
	j.r, j.release = r, jobRelease{ordered: true}
	return j
}

// reserve gives each record of recs (a fetched batch, in offset order, of
// records that will be picked) its place; its job is made when a worker
// claims it. Called by the poll loop before the records become runnable.
func (rl *releaser) reserve(recs []*kgo.Record, keep func(*kgo.Record) bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.gone != nil {
		return
	}
	for _, r := range recs {
		if keep(r) {
			rl.q.Push(place{r: r})
		}
	}
}

// claim returns the job of r's reserved place, made now with alloc (a
// worker's allocJob) unless a worker claimed it before (a record handed
// back: the same job), or a new one when the order was abandoned (the task
// closed: its outcome is not released). The work placed before r
// (insertBefore) sorts at r's offset: it is stepped over.
func (rl *releaser) claim(r *kgo.Record, alloc func() *job) *job {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for i := rl.q.Index(func(p *place) bool { return p.order() >= r.Offset }); i < rl.q.Len(); i++ {
		p := rl.q.At(i)
		if p.r == r {
			return p.jobOf(alloc)
		}
		if !p.work() {
			break
		}
	}
	return orderedJob(alloc(), r)
}

// order is where j sorts in a release order reserved by offset: its
// record's offset, or the offset of the record its work was placed
// before.
func (j *job) order() int64 {
	if j.isWork() {
		return j.rare.at
	}
	return j.r.Offset
}

// insertBefore gives work j its place in a release order reserved by
// offset: right before the place of next (its lane's next record), so
// that its outputs leave before that record's; after every place when
// next is nil or has no place (the order was abandoned).
func (rl *releaser) insertBefore(j *job, next *kgo.Record) {
	j.release.ordered = true
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.gone != nil {
		return // settle gives back what it holds
	}
	i := rl.q.Len()
	if next != nil {
		k := rl.q.Index(func(p *place) bool { return p.order() >= next.Offset })
		for ; k < rl.q.Len(); k++ {
			if rl.q.At(k).r == next {
				i = k
				break
			}
		}
	}
	switch {
	case i < rl.q.Len():
		j.rare.at = next.Offset
	case rl.q.Len() > 0:
		j.rare.at = rl.q.At(rl.q.Len() - 1).order() // the last place's: the order stays sorted
	}
	rl.q.Insert(i, place{j: j})
}

func (rl *releaser) add(j *job) {
	j.release.ordered, j.release.late = true, false
	rl.mu.Lock()
	rl.q.Push(place{r: j.r, j: j})
	rl.mu.Unlock()
}

// addLate gives j a place in the order to be taken later: when it settles,
// or by add before it frees the lane it holds. Only for a job that holds
// the partition's single lane (ordering partition).
func (rl *releaser) addLate(j *job) { j.release.ordered, j.release.late = true, true }

// placeLate takes the place of a job given one by addLate, if not yet.
func (rl *releaser) placeLate(j *job) {
	if j.release.late {
		rl.add(j)
	}
}

// settle marks j's verdict set and delivers every settled job at the head
// of the order, in order.
func (rl *releaser) settle(j *job) {
	j.outcome.one[0] = j
	rl.settleRun(j.outcome.one[:])
}

// settleRun marks the verdicts of the jobs of run set and delivers every
// settled job at the head of the order, in order: a run's jobs in one
// hold of the lock and, when they are at the head, one delivery.
func (rl *releaser) settleRun(run []*job) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.gone != nil {
		for _, j := range run {
			rl.gone(j.outcome.held) // the task closed: the outcome is not released
		}
		return
	}
	for _, j := range run {
		if j.release.late {
			j.release.late = false
			rl.q.Push(place{r: j.r, j: j})
		}
		j.release.settled = true
	}
	for {
		p, ok := rl.q.Peek()
		if !ok || !p.settled() || rl.heldByWork(p.j) {
			break
		}
		rl.q.Pop()
		if h := p.j; h.release.verdict != verdictNone {
			rl.run = append(rl.run, h)
		}
	}
	if len(rl.run) == 0 {
		return
	}
	rl.sk.deliver(rl.run)
	clear(rl.run) // no job outlives its delivery here
	rl.run = rl.run[:0]
}

// heldByWork reports whether head h waits for work it triggered
// (reserveAfter): the places right after it are that work's, and one has
// not settled. Once they all have, h and they are delivered in one run: one
// hold of the transaction's gate. For a record's head it is one look at
// the place after it.
func (rl *releaser) heldByWork(h *job) bool {
	for i := 1; i < rl.q.Len(); i++ {
		n := rl.q.At(i)
		if !n.work() || n.j.rare.after != h {
			return false
		}
		if !n.settled() {
			return true
		}
	}
	return false
}

// isOwn tells whether n is trig's place or that of a work trig triggered.
func (rl *releaser) isOwn(n *place, trig *job) bool {
	return n.j == trig || n.work() && n.j.rare.after == trig
}

// reserveAfter gives work wk, triggered by the record wk.After, its place
// in a release order reserved by offset now, as it is placed: right after
// the place of that record (and of the work it triggered before), which
// then waits for it (heldByWork), so that the work's outputs share the
// record's transaction. It returns the work's job, or nil when the record
// has no place any more (released already, or the order abandoned): the
// work then takes a place when it starts (insertBefore).
func (rl *releaser) reserveAfter(wk *Work) *job {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.gone != nil {
		return nil
	}
	r := wk.After
	i := rl.q.Index(func(p *place) bool { return p.order() >= r.Offset })
	for ; i < rl.q.Len() && rl.q.At(i).r != r; i++ {
		if !rl.q.At(i).work() {
			return nil
		}
	}
	if i == rl.q.Len() {
		return nil
	}
	// The trigger's job: made now when its record is not claimed yet
	// (work placed as the record's lane takes it), and claimed later.
	trig := rl.q.At(i).jobOf(func() *job { return new(job) })
	// After the works trig triggered before: the order is sorted, and
	// they are the places after trig of its order, so the first place of
	// a later order ends them — unless an order appended at the end took
	// trig's (insertBefore): then the places after trig are walked. A
	// round of a thousand timers was a walk of a thousand places a
	// firing.
	if e := rl.q.Index(func(p *place) bool { return p.order() > r.Offset }); e > i && rl.isOwn(rl.q.At(e-1), trig) {
		i = e
	} else {
		for i++; i < rl.q.Len() && rl.isOwn(rl.q.At(i), trig); i++ {
		}
	}
	j := &job{release: jobRelease{ordered: true}, rare: &jobRare{work: wk, at: r.Offset, after: trig}}
	rl.q.Insert(i, place{j: j})
	return j
}

// abandon drops the outcomes still waiting for their turn when the task
// closes (under exactly_once, behind a record that was never decided): their
// records stay uncommitted, and the outputs they held are given back with
// giveBack, as are those of records settled later.
func (rl *releaser) abandon(giveBack func(int64)) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.q.Each(func(p place) {
		if p.settled() {
			giveBack(p.j.outcome.held)
		}
	})
	rl.q.Reset()
	rl.gone = giveBack
}

// settle releases j's outcome, in partition order when that is kept, and
// frees its lane. While a run is decided (decideRun) it only notes j:
// settleRun releases the run's decided jobs together.
func (w *worker) settle(j *job, v verdict) {
	j.release.verdict = v
	if v == verdictFailed && w.t.State != nil {
		// Decided without its writes: its timestamp still moves the
		// stream time (ABI.md §4.2), which the next commit writes.
		w.t.State.Decided(j.r.Timestamp.UnixMilli())
	}
	if w.t.State != nil {
		// Before its release: the firings it makes due ride with it.
		w.timersAfter(j)
	}
	if w.runs.deciding {
		w.runs.settling = append(w.runs.settling, j)
		return
	}
	ln := j.ln
	j.ln = nil // read before the release: deliver may finish j
	switch {
	case j.release.ordered:
		w.t.rel.settle(j)
	case v != verdictNone:
		w.t.d.Sink.deliver(j.run())
	}
	if ln != nil {
		w.releaseLane(ln)
	}
}

// settleRun releases the outcomes of the run's jobs that settle noted, as
// settle would one by one, in one hold of the release order's lock and one
// delivery (the sink produces the run's outputs in one go), then frees their
// lanes: after the delivery, so that no record of a lane's key can overtake
// them. A run's jobs are all of one task, so all ordered or all not.
func (w *worker) settleRun() {
	run := w.runs.settling
	if len(run) == 0 {
		return
	}
	lanes := w.runs.runLanes[:0]
	for _, j := range run {
		if j.ln != nil {
			lanes = append(lanes, j.ln)
			j.ln = nil // read before the release: deliver may finish j
		}
	}
	if run[0].release.ordered {
		w.t.rel.settleRun(run)
	} else {
		n := 0
		for _, j := range run {
			if j.release.verdict != verdictNone {
				run[n] = j
				n++
			}
		}
		if n > 0 {
			w.t.d.Sink.deliver(run[:n])
		}
	}
	for _, ln := range lanes {
		w.releaseLane(ln)
	}
	clear(run)
	clear(lanes)
	w.runs.settling, w.runs.runLanes = run[:0], lanes[:0]
}

// releaseLane frees ln. While the worker admits records it only notes the
// lane: admit frees it with its next pick, under the same lock.
func (w *worker) releaseLane(ln *lane) {
	if !w.freed.note(ln) {
		w.t.release(ln)
	}
}

// run is j as a run of one (sink.deliver), with no allocation: the run's
// array is j's own.
func (j *job) run() []*job {
	j.outcome.one[0] = j
	return j.outcome.one[:]
}

// cutOff reports whether j's task was cut off (exactly_once: its
// partition revoked or its transaction aborted): nothing of it is
// released.
func (j *job) cutOff() bool { return j.t.Dead.Load() }

// acked notes the broker's answer for pr, one of j's produced records: a
// changelog record's offset goes to j's state batch (an error voids the
// batch); an output is counted once acknowledged. The sink acts on the
// error itself.
func (j *job) acked(pr *kgo.Record, err error) {
	t := j.t
	if j.sb != nil && pr.Topic == t.State.Changelog() {
		j.sb.Acked(pr.Offset, err) // a changelog record (state.Batch)
		return
	}
	if err == nil {
		t.out.Outputs.Add(1)
	}
}

// filtered finishes j, which succeeded without outputs: it is durable at
// once, and counted as dropped (filtered).
func (t *Task) filtered(j *job) {
	if j.isWork() {
		t.finishWork(j, nil)
		return
	}
	if t.Finish(j.r) {
		t.out.Dropped.Add(1) // ok with no output: filtered
	}
	j.tr.End("ok", "", "")
	j.recycle()
}

// drop gives up on j without an outcome: it stays uncommitted, and the
// partition's next owner processes it again (under a share group: it is
// released, and another host takes it).
func (t *Task) drop(j *job) {
	if j.isWork() {
		// Work has no record to process again: its place goes, and Done
		// is told; under exactly_once the place of work tied to its
		// trigger (Work.After) stays unsettled, as a dropped record's,
		// holding the trigger back (dropQueuedWorkLocked).
		if j.release.ordered && !(j.rare.after != nil && t.d.Ledger.Policy().DropKeepsPlace) {
			j.release.verdict = verdictNone
			t.rel.settle(j)
		}
		t.finishWork(j, ErrWorkDropped)
		return
	}
	switch {
	case j.release.ordered && !t.d.Ledger.Policy().DropKeepsPlace:
		j.release.verdict = verdictNone
		t.rel.settle(j)
	case j.release.ordered:
		// Under exactly_once its place stays unsettled: nothing behind a
		// record that is not done may enter a transaction.
		t.rel.placeLate(j)
	}
	t.mu.Lock()
	t.q.started--
	t.mu.Unlock()
	if t.d.Ledger.Abandon(j.r) {
		t.forget(j.r)
	}
}
