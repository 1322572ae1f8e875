// Failures (DESIGN.md, RATIONALE.md "Retries"): what an attempt's failure
// is, and where a failed record goes: the retry topic of its next
// attempt's backoff tier, or the dead-letter topic, with the failure headers
// internal/failhdr encodes.

package scheduler

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
	"github.com/wasmstream/wasmstream/tracing"
)

// failure says why an attempt failed and whether it may be retried.
type failure struct {
	kind      string
	msg       string
	retryable bool
}

func (t *task) classify(res *host.Result) failure {
	if f := res.Fault(); f != nil {
		kind := "fault." + string(f.Kind)
		return failure{kind, res.Err.Error(), t.d.retryable[kind]}
	}
	if res.Status == abi.StatusFail {
		return failure{KindGuestFail, res.Err.Error(), false}
	}
	return failure{KindGuestRetry, res.Err.Error(), true}
}

func historyEntry(f failure) string { return failhdr.NewEntry(0, f.kind, f.msg).Text }

// failureCopy is a failed record's copy to its retry or dead-letter
// topic: what the sink produces instead of its outputs.
type failureCopy struct {
	topic   string
	headers []kgo.RecordHeader
	count   counter // Retried or DeadLetter, counted once the copy is acknowledged
	kind    string  // tracing.ProduceRetry or tracing.ProduceDeadLetter
}

// failureCopy routes a failed attempt: to the retry topic of the next
// attempt's backoff tier when it may be retried there, otherwise to the
// dead-letter topic. Either way r is done once the sink made that copy
// durable. Asked by the sink as it delivers the record (the failure is
// observed then).
func (t *task) failureCopy(r *kgo.Record, attempt int, f failure, history []string, tr *tracing.Attempt) failureCopy {
	rc := &t.d.pc.Retry
	if f.retryable && attempt < rc.MaxAttempts && rc.Mode == config.RetryTopics {
		delay, tier := t.d.pc.Delay(attempt + 1)
		hs := t.failureHeaders(r, attempt, attempt+1, f, history)
		due := time.Now().Add(delay)
		hs = append(hs, kgo.RecordHeader{Key: HeaderDue, Value: strconv.AppendInt(nil, due.UnixMilli(), 10)}) // the one header failureHeaders leaves out
		t.observeFailure(r, attempt, f, t.d.pc.TierTopic(tier), due, tr)
		return failureCopy{t.d.pc.TierTopic(tier), hs, retriedCounter, tracing.ProduceRetry}
	}
	t.observeFailure(r, attempt, f, t.d.pc.DeadLetterTopic, time.Time{}, tr)
	return failureCopy{t.d.pc.DeadLetterTopic, t.failureHeaders(r, attempt, attempt, f, history), deadLetterCounter, tracing.ProduceDeadLetter}
}

func retriedCounter(s *Stats) *atomic.Int64    { return &s.Retried }
func deadLetterCounter(s *Stats) *atomic.Int64 { return &s.DeadLetter }

// failureHeaders builds a failed record's headers: its own (not wasmstream's),
// then what internal/failhdr encodes: where it was first consumed, its error
// history with the inline attempts and this failure appended, and
// attemptHeader as the attempt. What r's wasmstream.* headers are believed
// is the role's decision (role.prior): nothing on an input topic.
func (t *task) failureHeaders(r *kgo.Record, attempt, attemptHeader int, f failure, inline []string) []kgo.RecordHeader {
	now := time.Now().UTC()
	st, _ := t.d.role.prior(r)
	if st.FirstFailure.IsZero() {
		st.FirstFailure = now // on an input topic: this is the first failure
	}
	n := attempt - len(inline)
	for _, e := range inline {
		st.History = append(st.History, failhdr.Entry{Attempt: n, Text: e})
		n++
	}
	st.History = append(st.History, failhdr.NewEntry(attempt, f.kind, f.msg))
	st.Pipeline, st.Kind, st.Error = t.d.pc.Name, f.kind, f.msg
	st.Attempt, st.ModuleDigest, st.FailedAt = attemptHeader, t.version().M.Info().Digest, now
	st.Due = time.Time{}
	hs := failhdr.Own(r.Headers)
	return failhdr.Encode(slices.Grow(hs, 12+len(st.History)), &st)
}
