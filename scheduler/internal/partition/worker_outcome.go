package partition

// A record's outcome on its worker: what a guest call's result means for
// the record (done, waiting, retried, failed), and the measures and traces
// it leaves.

import (
	"context"
	"github.com/twmb/franz-go/pkg/kgo"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
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
		w.retry.first(j)
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
		if sc := w.t.d.Schema; sc != nil && sc.Decodes() {
			// The stable version is offered what the canary saw: the
			// decoded JSON, in a buffer of its own (the worker's is
			// reused by its next call).
			if buf, k, v, err := sc.Decode(w.t.life.ctx, nil, j.r); err == nil {
				setDecoded(&ar, buf, k, v)
			}
		}
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
	var f failure // an output that does not fit its schema (encodeOutputs)
	if c := w.runs.checked; c != nil && c.j == j {
		why, f = c.why, c.schema // asked while its run was in progress (runAccepts)
	} else {
		if t.d.Schema != nil {
			f = w.encodeOutputs(res)
		}
		if f.kind == "" {
			why = t.d.Sink.refuses(r, res.Outputs, writes)
		}
	}
	w.runs.checked = nil
	if why != "" {
		f = failure{hooks.KindProduce, why, false, 0}
	}
	if f.kind != "" {
		// A produce the broker refuses, or an output that does not fit
		// its schema, cannot succeed later: the record fails now, its
		// writes dropped with it.
		t.d.Budget.ReleaseOutputs(res.HeldBytes)
		w.decideTrace(j, true, end)
		j.failed(f, false)
		j.rs = nil
		w.settle(j, verdictFailed)
		return
	}
	w.decideTrace(j, false, end)
	if j.rs != nil {
		// Before the lane is freed: the next record of the key or
		// partition reads these writes (state.Partition.Commit), and the
		// stream time its timestamp moves (ABI.md §4.2), written with them.
		n := len(res.Outputs)
		b, outs := t.State.CommitAt(r.Offset, r.Timestamp.UnixMilli(), j.rs, res.Outputs)
		j.rs = nil
		if b != nil {
			j.sb = b
			res.Outputs = outs
			t.d.Stats.StateWrites.Add(int64(len(outs) - n))
		}
	}
	if len(res.Outputs) == 0 {
		t.d.Budget.ReleaseOutputs(res.HeldBytes)
		w.settle(j, verdictDone)
		return
	}
	j.outcome.outs, j.outcome.held = res.Outputs, res.HeldBytes
	w.outputRecords(j)
	w.settle(j, verdictOutputs)
}

// outputRecords readies what j's outputs (j.outcome.outs) need besides
// the record embedded in j, here, before the sink and the producer's
// callbacks see j: for exactly two, the second's record (outcome.second;
// the sink fills it: prepareOutputs) from j's state batch, which outlives
// every produce of j (state.Batch.ProduceRoom), or else from the worker's
// slab; for more, or a kept trace's per-output callbacks, j's jobRare.
// Only the worker's goroutine calls it.
func (w *worker) outputRecords(j *job) {
	n := len(j.outcome.outs)
	if n == 2 && j.outcome.second == nil && j.sb != nil {
		j.outcome.second = j.sb.ProduceRoom()
	}
	if n == 2 && j.outcome.second == nil {
		if len(w.slabs.recs) == 0 {
			w.slabs.recs = make([]kgo.Record, recSlab)
		}
		j.outcome.second = &w.slabs.recs[0]
		w.slabs.recs = w.slabs.recs[1:]
	}
	if n > 2 || j.tr != nil {
		j.rareFields()
	}
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
