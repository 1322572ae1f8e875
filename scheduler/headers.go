package scheduler

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
)

// Headers wasmstream adds to the copy of a failed record it produces to a
// retry topic or the dead-letter topic. The original record's key, value and
// own headers are kept; these say where it came from and why it failed.
// Values are UTF-8 text. internal/failhdr encodes and decodes them: these are
// its names, for tests and tools reading failure copies.
const (
	HeaderPipeline          = failhdr.Pipeline
	HeaderErrorKind         = failhdr.ErrorKind
	HeaderError             = failhdr.Error
	HeaderOriginalTopic     = failhdr.OriginalTopic
	HeaderOriginalPartition = failhdr.OriginalPartition
	HeaderOriginalOffset    = failhdr.OriginalOffset
	HeaderOriginalTimestamp = failhdr.OriginalTimestamp // milliseconds since the Unix epoch
	HeaderAttempt           = failhdr.Attempt
	HeaderModuleDigest      = failhdr.ModuleDigest
	HeaderFailedAt          = failhdr.FailedAt     // RFC 3339
	HeaderFirstFailure      = failhdr.FirstFailure // RFC 3339: when the first attempt failed
	HeaderDue               = failhdr.Due          // retry records: when the next attempt is due, ms since the Unix epoch
	// HeaderHistoryPrefix + N carries "<kind>: <error>" of failed attempt N,
	// one header per attempt, on retry and dead-letter records.
	HeaderHistoryPrefix = failhdr.HistoryPrefix
	// HeaderRedrivenFrom marks a record sent back from the dead-letter topic:
	// "<topic>[<partition>]@<offset>".
	HeaderRedrivenFrom = failhdr.RedrivenFrom
	// HeaderPrefix starts every header wasmstream adds.
	HeaderPrefix = failhdr.Prefix
)

// Error kinds in HeaderErrorKind.
const (
	KindGuestRetry = "guest.retry" // the guest returned a retryable failure
	KindGuestFail  = "guest.fail"  // the guest returned a terminal failure
	KindProduce    = "produce"     // an output could not be produced
	// Guest faults are "fault." + the host.FaultKind: fault.trap, fault.panic,
	// fault.exit, fault.deadline, fault.oom, fault.bad_pointer,
	// fault.protocol, fault.canceled.
)

// priorOf is what the host believes of r's earlier attempts, and how many of
// r's wasmstream.* headers it did not believe.
//
// On an input topic (a primary pipeline) nothing: anyone can produce there,
// so a wasmstream.* header is a forgery (or a leftover of a record copied
// from a retry topic); each is ignored and counted, except
// wasmstream.redriven.from, the mark `dlq redrive` puts on what it sends
// back. The record is on attempt 1, at its own coordinates.
//
// On a retry topic (a secondary pipeline) the host wrote them: they are
// decoded, and the ones that do not decode are counted; missing coordinates
// fall back to r's own and a missing attempt to 2 (the first retry).
//
// Called by newJob (to count and to show the guest its coordinates) and by
// failureHeaders (which recomputes it rather than carrying it through every
// fail path). Pure: safe from any goroutine.
func (t *task) priorOf(r *kgo.Record) (st failhdr.State, untrusted int) {
	own := failhdr.Origin{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
	if !t.p.secondary {
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, HeaderPrefix) && h.Key != HeaderRedrivenFrom {
				untrusted++
			}
		}
		return failhdr.State{Origin: own, Attempt: 1}, untrusted
	}
	st, err := failhdr.Decode(r.Headers)
	if es, ok := err.(failhdr.Errors); ok {
		untrusted = len(es)
	}
	if failhdr.Unusable(err, HeaderOriginalTopic) || failhdr.Unusable(err, HeaderOriginalPartition) || failhdr.Unusable(err, HeaderOriginalOffset) {
		st.Origin = own // coordinates come whole from one place
	}
	if st.Attempt < 2 {
		st.Attempt = 2
	}
	if st.FirstFailure.IsZero() {
		st.FirstFailure = time.Now().UTC()
	}
	return st, untrusted
}

// dueAt is when a retry record's next attempt is due (zero if unknown).
func dueAt(r *kgo.Record) time.Time { return failhdr.DueAt(r.Headers) }
