// Package abi is the contract between the wasmstream host and a processor
// module (the guest), version 1. It holds the constants, the status codes and
// the byte encodings that both sides use; ABI.md is the normative description
// and says everything an SDK author in another language needs.
//
// The package has no dependencies and no mutable state, so it compiles into
// guests (GOOS=wasip1) as well as into the host.
package abi

// Version is the ABI version this package describes. It is also carried in
// the name of the host module the guest imports from (HostModule), so that a
// guest built for another version fails at instantiation, never mid-stream.
const Version = 1

// HostModule is the import module name of the host functions of ABI v1.
const HostModule = "wasmstream_v1"

// Names of the functions a guest exports.
const (
	// ExportVersion: () -> i32. Must return Version. Required.
	ExportVersion = "wasmstream_abi_version"
	// ExportOnRecord: (handle i32, len i32) -> i32 status. Required.
	ExportOnRecord = "wasmstream_on_record"
	// ExportOnTimer: (handle i32, len i32) -> i32 status: a due timer's
	// firing (ABI.md §4.2), its encoding (TimerFiring) read with
	// record_read. Optional; required of a module that imports
	// ImportTimerSet.
	ExportOnTimer = "wasmstream_on_timer"
	// ExportMemory is the guest's linear memory. Required.
	ExportMemory = "memory"
	// ExportInitialize is the WASI reactor initialiser, run once per
	// instance before anything else when present (Go and C reactors have it).
	ExportInitialize = "_initialize"
)

// Names of the host functions in HostModule.
const (
	// ImportRecordRead: (handle i32, buf i32, buf_len i32) -> i32.
	ImportRecordRead = "record_read"
	// ImportEmit: (handle i32, ptr i32, len i32) -> i32.
	ImportEmit = "emit"
	// ImportSetError: (handle i32, ptr i32, len i32) -> i32.
	ImportSetError = "set_error"
	// ImportLog: (level i32, ptr i32, len i32) -> ().
	ImportLog = "log"
	// ImportStateGet: (handle i32, key i32, key_len i32, buf i32, buf_len i32) -> i32.
	ImportStateGet = "state_get"
	// ImportStatePut: (handle i32, key i32, key_len i32, val i32, val_len i32) -> i32.
	ImportStatePut = "state_put"
	// ImportStateDelete: (handle i32, key i32, key_len i32) -> i32.
	ImportStateDelete = "state_delete"
	// ImportStateScan: (handle i32, prefix i32, prefix_len i32, after i32, after_len i32, buf i32, buf_len i32) -> i32.
	ImportStateScan = "state_scan"
	// ImportStateGet2: (handle i32, key i32, key_len i32, sub i32, sub_len i32, buf i32, buf_len i32) -> i32 (ABI.md §4.2).
	ImportStateGet2 = "state_get2"
	// ImportStatePut2: (handle i32, key i32, key_len i32, sub i32, sub_len i32, val i32, val_len i32) -> i32.
	ImportStatePut2 = "state_put2"
	// ImportStateDelete2: (handle i32, key i32, key_len i32, sub i32, sub_len i32) -> i32.
	ImportStateDelete2 = "state_delete2"
	// ImportStateScan2: (handle i32, key i32, key_len i32, prefix i32, prefix_len i32, after i32, after_len i32, buf i32, buf_len i32) -> i32.
	ImportStateScan2 = "state_scan2"
	// ImportStreamTime: (handle i32, out i32) -> i32: the partition's stream time, an i64 at out.
	ImportStreamTime = "stream_time"
	// ImportTimerSet: (handle i32, key i32, key_len i32, at i64) -> i32: the event-time timer (key, at).
	ImportTimerSet = "timer_set"
	// ImportTimerDelete: (handle i32, key i32, key_len i32, at i64) -> i32.
	ImportTimerDelete = "timer_delete"
)

// MaxStateKeyBytes bounds a state key (state_get, state_put, state_delete;
// a scan's prefix and cursor). Values are bounded by the pipeline's
// state.max_value_bytes.
const MaxStateKeyBytes = 1024

// MaxHeaders bounds the headers of what a guest hands the host: one output
// (emit) or one HTTP request (async_start). A header takes 8 bytes in the
// encoding and about five times that once decoded, so 16 MiB of empty
// headers in one output would cost the host ~84 MB. A Kafka record rarely
// carries more than a few dozen. More is a bad encoding (ErrnoBadEncoding
// from emit; async_start refuses the request). What the host hands a guest
// (the record, an HTTP response) has no such bound: it carries what Kafka
// or the server gave.
const MaxHeaders = 1000

// Status is what wasmstream_on_record returns: the outcome of a record.
type Status int32

const (
	// StatusOK: the record succeeded; what it emitted is released.
	StatusOK Status = 0
	// StatusPending: the record waits on asynchronous operations it started
	// (async_start). It stays in flight and its handle valid until a call of
	// wasmstream_on_complete for it returns another status.
	StatusPending Status = 1
	// StatusRetry: a retryable failure. Emitted outputs are discarded.
	StatusRetry Status = 2
	// StatusFail: a terminal failure; the record will not be retried.
	// Emitted outputs are discarded.
	StatusFail Status = 3
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusPending:
		return "pending"
	case StatusRetry:
		return "retry"
	case StatusFail:
		return "fail"
	}
	return "invalid"
}

// Errno values returned (negated) by host functions. A host function returns
// 0 or a non-negative count on success and -Errno on failure. A pointer/length
// pair outside the guest's memory is not an errno: it traps the call, the
// record fails and the instance is discarded (see ABI.md, "Faults").
type Errno int32

const (
	ErrnoBadHandle    Errno = 1  // the handle names no record in flight on this instance
	ErrnoBufTooSmall  Errno = 2  // record_read: buf_len is smaller than the record
	ErrnoBadEncoding  Errno = 3  // emit: the output encoding is malformed (or has more than MaxHeaders headers)
	ErrnoTopicDenied  Errno = 4  // emit: the output topic is not allowed for this pipeline
	ErrnoLimit        Errno = 5  // emit, state_put, state_delete: the record's output count or bytes limit is reached (a state write counts as an output), or state_put: the partition's state.max_bytes; async_start: the record's operation limit is reached
	ErrnoNotSupported Errno = 6  // the call is not supported by this host
	ErrnoBadOp        Errno = 7  // result_read: op is not the operation being completed
	ErrnoNotFound     Errno = 8  // state_get: the key has no value
	ErrnoTooLarge     Errno = 9  // state_*: the key (or sub) is over MaxStateKeyBytes, the value over state.max_value_bytes, or a one-part key begins with the host's two-part mark (ABI.md §4.2)
	ErrnoWrongKey     Errno = 10 // state_*: the key belongs to another input partition than the record's
	ErrnoNoState      Errno = 11 // state_*: the pipeline has no state (state.enabled is off)
)

func (e Errno) Error() string {
	switch e {
	case ErrnoBadHandle:
		return "bad record handle"
	case ErrnoBufTooSmall:
		return "buffer too small"
	case ErrnoBadEncoding:
		return "malformed output encoding (or more than 1000 headers)"
	case ErrnoTopicDenied:
		return "output topic not allowed"
	case ErrnoLimit:
		return "output limit reached"
	case ErrnoNotSupported:
		return "not supported"
	case ErrnoBadOp:
		return "bad operation id"
	case ErrnoNotFound:
		return "state key not found"
	case ErrnoTooLarge:
		return "state key or value too large"
	case ErrnoWrongKey:
		return "state key outside the record's partition"
	case ErrnoNoState:
		return "state not enabled for this pipeline"
	}
	return "unknown errno"
}

// Log levels for the log host function; they map to slog levels.
const (
	LogDebug int32 = 0
	LogInfo  int32 = 1
	LogWarn  int32 = 2
	LogError int32 = 3
)
