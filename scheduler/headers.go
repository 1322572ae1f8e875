package scheduler

// Headers wasmstream adds to a record it dead-letters. The original record's
// key, value and headers are kept; these say where it came from and why it
// failed. Values are UTF-8 text.
const (
	HeaderPipeline          = "wasmstream.pipeline"
	HeaderErrorKind         = "wasmstream.error.kind"
	HeaderError             = "wasmstream.error"
	HeaderOriginalTopic     = "wasmstream.original.topic"
	HeaderOriginalPartition = "wasmstream.original.partition"
	HeaderOriginalOffset    = "wasmstream.original.offset"
	HeaderOriginalTimestamp = "wasmstream.original.timestamp" // milliseconds since the Unix epoch
	HeaderAttempt           = "wasmstream.attempt"
	HeaderModuleDigest      = "wasmstream.module.digest"
	HeaderFailedAt          = "wasmstream.failed.at"     // RFC 3339
	HeaderFirstFailure      = "wasmstream.first.failure" // RFC 3339: when the first attempt failed
	HeaderDue               = "wasmstream.due"           // retry records: when the next attempt is due, ms since the Unix epoch
	// HeaderHistoryPrefix + N carries "<kind>: <error>" of failed attempt N,
	// one header per attempt, on retry and dead-letter records.
	HeaderHistoryPrefix = "wasmstream.history."
	// HeaderRedrivenFrom marks a record sent back from the dead-letter topic:
	// "<topic>[<partition>]@<offset>".
	HeaderRedrivenFrom = "wasmstream.redriven.from"
	// HeaderPrefix starts every header wasmstream adds.
	HeaderPrefix = "wasmstream."
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
