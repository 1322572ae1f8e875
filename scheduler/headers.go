package scheduler

import (
	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
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
	HeaderModuleLabel       = failhdr.ModuleLabel  // the version's label, when it has one
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

// Error kinds in HeaderErrorKind (scheduler/internal/hooks).
const (
	KindGuestRetry = hooks.KindGuestRetry // the guest returned a retryable failure
	KindGuestFail  = hooks.KindGuestFail  // the guest returned a terminal failure
	KindProduce    = hooks.KindProduce    // an output could not be produced
	// Guest faults are "fault." + the host.FaultKind: fault.trap, fault.panic,
	// fault.exit, fault.deadline, fault.oom, fault.bad_pointer,
	// fault.protocol, fault.canceled.
)
