package scheduler

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/tracing"
)

// ErrStarted is returned by settings that must precede Runner.Start.
var ErrStarted = errors.New("the runner has started")

// ObserveFailures makes o see every failed attempt of every pipeline. It
// must be called before Start (tasks read the observer without a lock).
func (r *Runner) ObserveFailures(o FailureObserver) error {
	if r.started.Load() {
		return ErrStarted
	}
	for _, p := range r.pipes() {
		p.failObs = o
	}
	return nil
}

// observeFailure tells the pipeline's observer, if any, of a failed attempt.
func (t *task) observeFailure(r *kgo.Record, attempt int, f failure, dest string, due time.Time, tr *tracing.Attempt) {
	o := t.d.failObs
	if o == nil {
		return
	}
	st, _ := t.d.role.prior(r)
	e := &FailureEvent{At: time.Now(), Pipeline: t.d.pc.Name, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		OriginTopic: st.Origin.Topic, OriginPartition: st.Origin.Partition, OriginOffset: st.Origin.Offset,
		Kind: f.kind, Error: tracing.OneLine(f.msg, MaxEventErrorBytes), Attempt: attempt, Dest: dest, Retry: !due.IsZero(), Due: due, TraceID: tr.TraceID()}
	k := r.Key
	if len(k) > MaxEventKeyBytes {
		k, e.KeyTruncated = k[:MaxEventKeyBytes], true
	}
	e.Key = append([]byte(nil), k...)
	e.ValueSize = len(r.Value)
	if r.Value == nil {
		e.ValueSize = -1
	}
	e.Value = append([]byte(nil), r.Value[:min(len(r.Value), MaxEventValueBytes)]...)
	for _, h := range failhdr.Own(r.Headers) {
		if len(e.Headers) == MaxEventHeaders {
			e.HeadersCut++
			continue
		}
		eh := EventHeader{Key: h.Key, Value: append([]byte(nil), h.Value[:min(len(h.Value), MaxEventHeaderBytes)]...)}
		if len(eh.Key) > MaxEventKeyBytes {
			eh.Key, eh.Cut = eh.Key[:MaxEventKeyBytes], true
		}
		eh.Cut = eh.Cut || len(h.Value) > MaxEventHeaderBytes
		e.Headers = append(e.Headers, eh)
	}
	v := t.version()
	e.ModuleDigest, e.Canary = v.M.Info().Digest, v != t.d.mods.Current()
	o.ObserveFailure(e)
}
