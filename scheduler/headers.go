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
	HeaderFailedAt          = "wasmstream.failed.at" // RFC 3339
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
