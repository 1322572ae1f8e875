package scheduler

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/tracing"
)

// FailureEvent is one failed attempt as the scheduler routed it: to a retry
// tier's topic or to the dead-letter topic. Its fields are copies, bounded
// in size; the observer may keep it.
type FailureEvent struct {
	At       time.Time
	Pipeline string // the pipeline whose attempt failed (a retry tier is "<name>.retry")
	// The record as consumed (on a retry topic: the retry copy) and where
	// it was first consumed.
	Topic           string
	Partition       int32
	Offset          int64
	OriginTopic     string
	OriginPartition int32
	OriginOffset    int64
	Key             []byte // at most MaxEventKeyBytes of the key
	KeyTruncated    bool
	Kind            string // scheduler.Kind* or "fault.<kind>"
	Error           string // at most MaxEventErrorBytes
	Attempt         int    // the attempt that failed
	Dest            string // the retry tier topic or the dead-letter topic
	Retry           bool   // Dest is a retry tier: attempt+1 is due at Due
	Due             time.Time
	TraceID         string // "" when not traced
	// Value is at most MaxEventValueBytes of the record's value; ValueSize
	// its whole length (-1: a null value).
	Value     []byte
	ValueSize int
	// Headers are the record's own headers (not wasmstream.*), at most
	// MaxEventHeaders, each key cut to MaxEventKeyBytes and value to
	// MaxEventHeaderBytes; HeadersCut counts those left out.
	Headers    []EventHeader
	HeadersCut int
	// ModuleDigest is the version that ran the attempt; Canary, whether it
	// was the pipeline's canary.
	ModuleDigest string
	Canary       bool
}

// EventHeader is one header of a FailureEvent, cut to its bounds.
type EventHeader struct {
	Key   string
	Value []byte
	Cut   bool // key or value was cut
}

// Bounds of what a FailureEvent copies from a record.
const (
	MaxEventKeyBytes    = 64
	MaxEventErrorBytes  = 512
	MaxEventValueBytes  = 256
	MaxEventHeaders     = 8
	MaxEventHeaderBytes = 128
)

// FailureObserver is told of every failed attempt at the moment the
// scheduler routes it (before the retry or dead-letter produce is
// acknowledged). ObserveFailure is called from the task's goroutines,
// concurrently for different tasks; it must be fast and must not block or
// call back into the Runner.
type FailureObserver interface {
	ObserveFailure(e *FailureEvent)
}

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
	e.ModuleDigest, e.Canary = v.m.Info().Digest, v != t.d.mods.current()
	o.ObserveFailure(e)
}
