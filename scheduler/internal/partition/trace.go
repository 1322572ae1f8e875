package partition

import (
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/tracing"
)

// An attempt's trace (job.tr) is begun lazily, so that a record that is
// not traced allocates nothing for tracing (RATIONALE.md, "Tracing"): a
// record processed in one call is decided first, when its outcome is known
// (decideTrace), and its trace begun only if it is kept, from what the
// worker knows of its call. A record that waits on asynchronous operations
// notes them over time: its trace is begun when it waits
// (worker.beginTrace), or when the first operation is noted (jobObserver,
// beginTraceInCall). After its decision a job's trace is nil unless kept.

// traceOwed is what an attempt's trace is still to be told by the worker
// once the attempt's call returned: its first call, which the observer left
// to it, and its instance, when the observer began it.
type traceOwed uint8

const (
	owedOnRecord traceOwed = 1 << iota // the first call, abi.ExportOnRecord, is not noted yet
	owedOnBatch                        // the first call, abi.ExportOnBatch, is not noted yet
	owedInstance                       // begun by the observer: its instance is not set

	owedCall = owedOnRecord | owedOnBatch
)

// firstCallOwed is what an attempt owes when its first call was export
// (0: a call the worker cannot note for it).
func firstCallOwed(export string) traceOwed {
	switch export {
	case abi.ExportOnRecord:
		return owedOnRecord
	case abi.ExportOnBatch:
		return owedOnBatch
	}
	return 0
}

// beginTraceInCall begins j's trace from the observer, while its attempt
// runs: its instance is set when the call returned (traceRan).
func (t *Task) beginTraceInCall(j *job) *tracing.Attempt {
	if j.isWork() {
		return nil // work (work.go) is not traced
	}
	j.owed |= owedInstance
	return t.d.Hooks.Tracer.Begin(t.traceInfo(j), (*recordHeaders)(j.r))
}

// beginTrace begins the trace of j, whose attempt waits on asynchronous
// operations (its last call ended at end): they are noted as they come.
func (w *worker) beginTrace(j *job, end time.Time) {
	t := w.t
	if t.d.Hooks.Tracer == nil {
		return
	}
	if j.tr == nil {
		j.tr = t.d.Hooks.Tracer.Begin(t.traceInfo(j), (*recordHeaders)(j.r))
		j.owed |= owedInstance
	}
	w.traceRan(j, end)
}

// decideTrace decides whether j's attempt, whose outcome is known (failed
// or not; its last call ended at end), is traced, by tracing's rule
// (Tracer.Keep, Attempt.Decide). A trace not kept is dropped: nothing more
// of the attempt is traced, and its outputs carry no new trace context.
func (w *worker) decideTrace(j *job, failed bool, end time.Time) {
	t := w.t
	if j.tr == nil {
		if t.d.Hooks.Tracer == nil {
			return
		}
		p, keep := t.d.Hooks.Tracer.Keep(failed, int(j.attempt), (*recordHeaders)(j.r))
		if !keep {
			j.owed = 0
			return
		}
		info := t.traceInfo(j)
		info.Instance = w.inst.ID()
		j.tr = t.d.Hooks.Tracer.BeginKept(info, p, j.started)
	}
	w.traceRan(j, end)
	if !j.tr.Decide(failed) {
		j.tr = nil
	}
}

// traceRan tells j's trace what it is owed once the attempt's call
// returned: its first call (from j.started to end, as the observer saw
// it), and its instance.
func (w *worker) traceRan(j *job, end time.Time) {
	o := j.owed
	if o == 0 {
		return
	}
	j.owed = 0
	if o&owedInstance != 0 {
		j.tr.SetInstance(w.inst.ID())
	}
	switch {
	case o&owedOnRecord != 0:
		j.tr.Call(abi.ExportOnRecord, j.started, end.Sub(j.started), nil)
	case o&owedOnBatch != 0:
		j.tr.Call(abi.ExportOnBatch, j.started, end.Sub(j.started), nil)
	}
}

// traceInfo describes j's current attempt for its trace.
func (t *Task) traceInfo(j *job) tracing.Info {
	r := j.r
	info := tracing.Info{
		Pipeline: t.d.Config.Name, Group: t.d.Group, Module: filepath.Base(t.d.Config.Module), ModuleDigest: t.version().M.Info().Digest,
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Attempt: int(j.attempt),
	}
	o := j.origin()
	info.OriginTopic, info.OriginPartition, info.OriginOffset = o.Topic, o.Partition, o.Offset
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
