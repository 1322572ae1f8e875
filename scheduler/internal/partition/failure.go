// Failures (DESIGN.md, RATIONALE.md "Retries"): what an attempt's failure
// is, and where a failed record goes: the retry topic of its next
// attempt's backoff tier, or the dead-letter topic, with the failure headers
// internal/failhdr encodes.

package partition

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/tracing"
)

// failure says why an attempt failed and whether it may be retried.
type failure struct {
	kind      string
	msg       string
	retryable bool
	schemaID  int // a schema failure's schema id, for the failure headers (0: none)
}

func (t *Task) classify(res *host.Result) failure {
	if f := res.Fault(); f != nil {
		kind := "fault." + string(f.Kind)
		return failure{kind, res.Err.Error(), t.d.Retryable[kind], 0}
	}
	if res.Status == abi.StatusFail {
		return failure{hooks.KindGuestFail, res.Err.Error(), false, 0}
	}
	return failure{hooks.KindGuestRetry, res.Err.Error(), true, 0}
}

func historyEntry(f failure) string { return failhdr.NewEntry(0, f.kind, f.msg).Text }

// failureCopy is a failed record's copy to its retry or dead-letter
// topic: what the sink produces instead of its outputs.
type failureCopy struct {
	topic   string
	headers []kgo.RecordHeader
	count   hooks.Counter // Retried or DeadLetter, counted once the copy is acknowledged
	kind    string        // tracing.ProduceRetry or tracing.ProduceDeadLetter
}

// failureCopy routes a failed attempt: to the retry topic of the next
// attempt's backoff tier when it may be retried there, otherwise to the
// dead-letter topic. Either way r is done once the sink made that copy
// durable. Asked by the sink as it delivers the record (the failure is
// observed then).
func (t *Task) failureCopy(r *kgo.Record, attempt int, f failure, history []string, tr *tracing.Attempt) failureCopy {
	rc := &t.d.Config.Retry
	if f.retryable && attempt < rc.MaxAttempts && rc.Mode == config.RetryTopics {
		delay, tier := t.d.Config.Delay(attempt + 1)
		hs := t.failureHeaders(r, attempt, attempt+1, f, history)
		due := time.Now().Add(delay)
		hs = append(hs, kgo.RecordHeader{Key: failhdr.Due, Value: strconv.AppendInt(nil, due.UnixMilli(), 10)}) // the one header failureHeaders leaves out
		t.observeFailure(r, attempt, f, t.d.Config.TierTopic(tier), due, tr)
		return failureCopy{t.d.Config.TierTopic(tier), hs, retriedCounter, tracing.ProduceRetry}
	}
	t.observeFailure(r, attempt, f, t.d.Config.DeadLetterTopic, time.Time{}, tr)
	return failureCopy{t.d.Config.DeadLetterTopic, t.failureHeaders(r, attempt, attempt, f, history), deadLetterCounter, tracing.ProduceDeadLetter}
}

func retriedCounter(s *hooks.Stats) *atomic.Int64    { return &s.Retried }
func deadLetterCounter(s *hooks.Stats) *atomic.Int64 { return &s.DeadLetter }

// failureHeaders builds a failed record's headers: its own (not wasmstream's),
// then what internal/failhdr encodes: where it was first consumed, its error
// history with the inline attempts and this failure appended, and
// attemptHeader as the attempt. What r's wasmstream.* headers are believed
// is the role's decision (role.prior): nothing on an input topic.
func (t *Task) failureHeaders(r *kgo.Record, attempt, attemptHeader int, f failure, inline []string) []kgo.RecordHeader {
	now := time.Now().UTC()
	st, _ := t.d.Role.prior(r)
	if st.FirstFailure.IsZero() {
		st.FirstFailure = now // on an input topic: this is the first failure
	}
	n := attempt - len(inline)
	for _, e := range inline {
		st.History = append(st.History, failhdr.Entry{Attempt: n, Text: e})
		n++
	}
	st.History = append(st.History, failhdr.NewEntry(attempt, f.kind, f.msg))
	st.Pipeline, st.Kind, st.Error = t.d.Config.Name, f.kind, f.msg
	st.Attempt, st.ModuleDigest, st.ModuleLabel, st.FailedAt = attemptHeader, t.version().M.Info().Digest, t.version().LabelText(), now
	st.Due = time.Time{}
	st.SchemaID = f.schemaID
	hs := failhdr.Own(r.Headers)
	return failhdr.Encode(slices.Grow(hs, 12+len(st.History)), &st)
}

// observeFailure tells the pipeline's observer, if any, of a failed attempt.
func (t *Task) observeFailure(r *kgo.Record, attempt int, f failure, dest string, due time.Time, tr *tracing.Attempt) {
	o := t.d.Hooks.Failures
	if o == nil {
		return
	}
	st, _ := t.d.Role.prior(r)
	e := &hooks.FailureEvent{At: time.Now(), Pipeline: t.d.Config.Name, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		OriginTopic: st.Origin.Topic, OriginPartition: st.Origin.Partition, OriginOffset: st.Origin.Offset,
		Kind: f.kind, Error: tracing.OneLine(f.msg, hooks.MaxEventErrorBytes), Attempt: attempt, Dest: dest, Retry: !due.IsZero(), Due: due, TraceID: tr.TraceID()}
	k := r.Key
	if len(k) > hooks.MaxEventKeyBytes {
		k, e.KeyTruncated = k[:hooks.MaxEventKeyBytes], true
	}
	e.Key = append([]byte(nil), k...)
	e.ValueSize = len(r.Value)
	if r.Value == nil {
		e.ValueSize = -1
	}
	e.Value = append([]byte(nil), r.Value[:min(len(r.Value), hooks.MaxEventValueBytes)]...)
	for _, h := range failhdr.Own(r.Headers) {
		if len(e.Headers) == hooks.MaxEventHeaders {
			e.HeadersCut++
			continue
		}
		eh := hooks.EventHeader{Key: h.Key, Value: append([]byte(nil), h.Value[:min(len(h.Value), hooks.MaxEventHeaderBytes)]...)}
		if len(eh.Key) > hooks.MaxEventKeyBytes {
			eh.Key, eh.Cut = eh.Key[:hooks.MaxEventKeyBytes], true
		}
		eh.Cut = eh.Cut || len(h.Value) > hooks.MaxEventHeaderBytes
		e.Headers = append(e.Headers, eh)
	}
	v := t.version()
	e.ModuleDigest, e.Canary = v.M.Info().Digest, v != t.d.Mods.Current()
	o.ObserveFailure(e)
}
