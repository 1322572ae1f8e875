package partition

// The engine's second kind of work: work that is not a fetched record (a
// timer firing). It takes a place in a lane like a record and runs in
// the lane's turn on a worker's instance, and its outputs leave through the
// sink in the partition's release order, but it has no input offset: the
// ledger is never told of it (DESIGN.md, "Work that is not a record").

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// Work is a unit of work that is not a fetched record. It takes its place
// in its key's lane under ordering key (nil Key: no order constraint, as a
// record with a null key), in the partition's one lane under ordering
// partition, and runs unconstrained under ordering none; placed at the
// lane's front (Task.PlaceWork) it runs before the lane's next record,
// after the one in progress. Its call into the instance is Call; what it
// comes to is told to Done, once.
//
// It has no input offset: the ledger (offset tracker, share
// acknowledgement) is never told of it, nothing is committed for it, it
// does not count in the task's records in flight (max_in_flight), and a
// failure has no retry or dead-letter copy (there is no record to copy): it
// goes to Done. Its outputs leave through the sink like a record's, in the
// partition's release order where one is kept: under exactly_once in the
// open transaction, before the outputs of its lane's next record, and with
// After set, in the transaction of the record that triggered it.
type Work struct {
	Key []byte
	// Call makes the work's call into in, on the worker's goroutine; tag
	// is the tag of the call (host.Instance.Process's), which names the
	// work to its asynchronous completions.
	Call func(ctx context.Context, in Instance, tag any) host.Result
	// Done is told what the work came to: nil once its outputs are
	// durable (at once without outputs; under exactly_once once they are in
	// the open transaction), ErrWorkDropped when it was given up before
	// an outcome (the task stopped, or its call was canceled), or its
	// failure. Called once, from a worker, a producer's callback or the
	// goroutine stopping the task; it must not block, nor call into the
	// task. A Work is placed once.
	Done func(err error)
	// After is the record whose outcome triggered the work, if any: under
	// exactly_once, placed before that record is released, the record's
	// outputs wait for the work's and both leave in one delivery, in one
	// transaction (releaser.reserveAfter). Elsewhere it changes nothing.
	After *kgo.Record

	// mark is its place in a task's queue (unit), made by PlaceWork;
	// markCtx is its Context, inside the Work (context.WithValue was an
	// allocation of every work's).
	mark    kgo.Record
	markCtx markContext

	placed *job // its place, reserved by PlaceWork (After), taken by startWork
	// fire is the timer the work fires (timers.go); its call is the
	// worker's (worker.fire), not Call.
	fire *firing
}

// ErrWorkDropped is Work.Done's error for work given up without an
// outcome: the task stopped before it ran, or its call was canceled.
var ErrWorkDropped = errors.New("work dropped: its task stopped")

// unit is what a task's queues hold: a fetched record, or the mark of work
// that is not one (its place in the queue: a record no fetch makes, whose
// offset is markOffset and whose Context leads back to the work). One word
// held by value, as the queues' element was before work: a second word
// (the work beside the record) cost every record's place in a lane and
// every copy of it its share of a queue twice as large.
type unit struct {
	r *kgo.Record
}

// markOffset is the offset of a work's mark: below every fetched record's.
const markOffset = math.MinInt64

// workKey is the key of a mark's Context under which its work is found.
type workKey struct{}

// markContext is a mark's Context: Value(workKey{}) is its work, as
// context.WithValue's would be, without an allocation of its own.
type markContext struct {
	context.Context
	wk *Work
}

func (c *markContext) Value(key any) any {
	if key == (workKey{}) {
		return c.wk
	}
	return c.Context.Value(key)
}

// markUnit makes wk's mark, its place in a queue (a Work is placed once).
func (wk *Work) markUnit() unit {
	wk.markCtx = markContext{Context: context.Background(), wk: wk}
	wk.mark = kgo.Record{Key: wk.Key, Offset: markOffset, Context: &wk.markCtx}
	return unit{r: &wk.mark}
}

// w is the work u marks; nil when u is a record (or none).
func (u unit) w() *Work {
	if u.r == nil || u.r.Offset != markOffset {
		return nil
	}
	return u.r.Context.Value(workKey{}).(*Work)
}

// isWork reports whether u marks work (w is not nil).
func (u unit) isWork() bool { return u.r != nil && u.r.Offset == markOffset }

func (u unit) none() bool { return u.r == nil }

// key is the ordering key of u (a mark's is its work's).
func (u unit) key() []byte { return u.r.Key }

// before reports whether u is taken before a lane's head v (pickLocked):
// the lower offset, and work before any record (it is due now).
func (u unit) before(v unit) bool {
	switch {
	case u.isWork():
		return true
	case v.isWork():
		return false
	}
	return u.r.Offset < v.r.Offset
}

// PlaceWork queues wk in its lane: at its front (it runs before every
// record waiting there) or at its back. It reports false, and wk is not
// run, when the task is stopping. Called with no lock of the engine held
// (it takes releaser.mu, then task.mu).
func (t *Task) PlaceWork(wk *Work, front bool) bool {
	if wk.After != nil && t.rel != nil && t.rel.byOffset {
		// Its place next to its trigger's, before the task's lock (the
		// releaser's lock comes first).
		wk.placed = t.rel.reserveAfter(wk)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.q.stopping {
		return false // a place reserved stays unsettled: see Stop
	}
	t.placeLocked(wk.markUnit(), front)
	t.q.queued++
	t.dispatchLocked()
	return true
}

// laneNextLocked is the next record waiting in ln (nil: none, or no
// lane), which work just taken from ln runs before.
func (t *Task) laneNextLocked(ln *lane) *kgo.Record {
	if ln == nil {
		return nil
	}
	for i := range ln.q.Len() {
		if u := *ln.q.At(i); !u.isWork() {
			return u.r
		}
	}
	return nil
}

// isWork reports whether j carries work rather than a record.
func (j *job) isWork() bool { return j.r == nil }

// work is the work j carries (isWork).
func (j *job) work() *Work { return j.rare.work }

// describe names j's record, or says it is work, for errors.
func (j *job) describe() string {
	if j.isWork() {
		return "work"
	}
	return fmt.Sprintf("%s[%d]@%d", j.r.Topic, j.r.Partition, j.r.Offset)
}

// finish makes j's outcome durable: its record finished (the ledger
// told), or its work done.
func (j *job) finish() {
	if j.isWork() {
		j.t.finishWork(j, nil)
		return
	}
	j.t.Finish(j.r)
}

// finishWork ends j's work with err (Work.Done).
func (t *Task) finishWork(j *job, err error) {
	t.mu.Lock()
	t.q.started--
	t.mu.Unlock()
	j.work().Done(err)
}

// startWork runs wk, taken from ln (nil: no lane), on the worker's
// instance: one call, its outcome decided by workOutcome.
func (w *worker) startWork(wk *Work, ln *lane, next *kgo.Record) {
	t := w.t
	var j *job
	if j = wk.placed; j != nil {
		wk.placed = nil // its place is reserved next to its trigger's (PlaceWork)
		j.t, j.ln, j.attempt = t, ln, 1
	} else {
		j = w.allocJob()
		j.t, j.ln, j.attempt = t, ln, 1
		j.rareFields().work = wk
		w.placeWork(j, next)
	}
	if wk.fire != nil {
		w.fire(j, wk.fire) // timers.go
		return
	}
	in := w.instance()
	if in == nil {
		t.drop(j) // aborted
		return
	}
	w.prepare(j, in)
	w.g.state.Store(WorkerBusy)
	res := wk.Call(t.life.ctx, in, j)
	var end time.Time
	j.started, end = in.LastCall()
	w.outcomeAt(j, res, end)
	w.accountCalls()
	w.settleState()
}

// placeWork gives j its place in the partition's release order, if one is
// kept: under exactly_once (places reserved at enqueue) right before the
// place of next, its lane's next record (at the back when there is none),
// so that its outputs leave before that record's; otherwise as a record
// started now takes its place.
func (w *worker) placeWork(j *job, next *kgo.Record) {
	t := w.t
	switch {
	case t.rel == nil:
	case t.rel.byOffset:
		t.rel.insertBefore(j, next)
	case t.d.Config.Ordering == config.OrderPartition && j.ln != nil:
		t.rel.addLate(j)
	default:
		t.rel.add(j)
	}
}

// workOutcome is outcomeAt for work: a call that waits goes on waiting;
// one canceled is dropped; a failure, or outputs a topic would refuse, go
// to Done and release nothing; outputs leave through the sink.
func (w *worker) workOutcome(j *job, res host.Result, end time.Time) {
	t := w.t
	if res.Status == abi.StatusPending {
		w.waits(j)
		return
	}
	w.g.handled.Add(1)
	var err error
	switch f := res.Fault(); {
	case f != nil && f.Kind == host.FaultCanceled:
		t.d.Budget.ReleaseOutputs(res.HeldBytes)
		t.drop(j)
		return
	case f != nil:
		w.g.faults.Add(1)
		t.ps.Faults.Add(1)
		err = fmt.Errorf("work failed: %w", res.Err)
	case res.Status != abi.StatusOK:
		err = fmt.Errorf("work failed (status %d): %w", res.Status, res.Err)
	default:
		if why := t.d.Sink.refuses(nil, res.Outputs, nil); why != "" {
			err = errors.New("an output of work would be refused: " + why)
		}
	}
	if err != nil {
		t.d.Budget.ReleaseOutputs(res.HeldBytes)
		t.finishWork(j, err)
		w.settle(j, verdictNone)
		return
	}
	if len(res.Outputs) == 0 {
		t.d.Budget.ReleaseOutputs(res.HeldBytes)
		w.settle(j, verdictDone)
		return
	}
	j.outcome.outs, j.outcome.held = res.Outputs, res.HeldBytes
	w.outputRecords(j) // a firing's output and its timer's delete: the second record from the worker's slab, as a record's
	w.settle(j, verdictOutputs)
}

// dropQueuedWorkLocked collects the work still queued when the task
// stops, for Stop to tell each ErrWorkDropped once its lock is released.
// A place reserved for such work next to its trigger's (Work.After) stays
// unsettled, as a dropped record's does under exactly_once: the trigger is
// not released without its work's outputs, stays uncommitted, and the
// partition's next owner processes it again (which triggers the work
// again). Settling it here could deliver: Stop is called with the
// transaction's gate or commitMu held, which come after releaser.mu.
func (t *Task) dropQueuedWorkLocked() []*Work {
	var dropped []*Work
	each := func(u unit) {
		if wk := u.w(); wk != nil {
			dropped = append(dropped, wk)
		}
	}
	t.q.free.Each(each)
	t.q.single.q.Each(each)
	for _, ln := range t.q.lanes {
		ln.q.Each(each)
	}
	return dropped
}
