// Package hooks holds what a partition's engine reports through and the
// pipeline reads: its counters (Stats), the failed attempts it routes
// (FailureObserver) and the instruments it records on (Metrics). It knows
// no task, pipeline or client.
package hooks

import (
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/tracing"
)

// Hooks are everything that observes the record path, in one value: the
// runner holds it, each pipeline gets a copy, and each pipeline's engines
// get the pipeline's (partition.Deps.Hooks). Each is opt-in: a nil field
// costs the record path one nil check and nothing else. What the engine
// counts (Stats) is not a hook: it is always counted, per partition, and
// read by whoever asks (metrics, /status, the dashboard).
type Hooks struct {
	Tracer   *tracing.Tracer // one trace per record (tracing.sample_ratio); nil: tracing off
	Metrics  *Metrics        // the per-record instruments; nil: no metrics listener
	Failures FailureObserver // told of every failed attempt (the dashboard); nil: none
}

// Stats are a pipeline's counters since it started. Safe for concurrent use.
// The counters of a record's path — Fetched, Done, Outputs, Dropped,
// DeadLetter, Faults, Skipped, Retried, Restarted, Borrowed, Released — are
// counted per partition only (Pipeline.parts: one atomic add on the
// partition's own counters) and summed when read (Pipeline.Snapshot); the
// pipeline's own Stats hold the rest. Every field has its row in package
// scheduler's counterTable (scheduler/counters.go), from which Snapshot,
// the metrics and /status read it: a field without one fails
// TestCounterTableIsWired.
type Stats struct {
	Fetched atomic.Int64 // records handed to tasks
	// Read counts the records the client decoded from fetch responses:
	// Fetched plus what it read again (data of a paused partition is
	// dropped and fetched again) and the records of a batch before the
	// offset asked for.
	Read    atomic.Int64
	Done    atomic.Int64 // records whose outcome is durable (output or dead letter acknowledged)
	Outputs atomic.Int64 // output records acknowledged by the broker
	// Dropped counts the records the module decided ok with no output
	// (filtered).
	Dropped    atomic.Int64
	DeadLetter atomic.Int64 // records acknowledged on the dead-letter topic
	Faults     atomic.Int64 // guest faults (each discarded an instance)
	Commits    atomic.Int64 // successful offset commits
	Skipped    atomic.Int64 // records skipped because a previous owner recorded them done
	Retried    atomic.Int64 // records acknowledged on a retry topic (or retried inline)
	Restarted  atomic.Int64 // records restarted because their instance was discarded while they waited
	Borrowed   atomic.Int64 // instances borrowed above the tasks' minimums (records waited)
	Released   atomic.Int64 // borrowed instances given back after instances.idle_timeout without a record
	HeldBack   atomic.Int64 // times the poll loop waited because no task took more records (backpressure)
	Pauses     atomic.Int64 // times a partition's fetching was paused (a full task while others took records)
	// ForgedHeaders counts wasmstream.* headers not believed: any on an
	// input topic, malformed ones on a retry topic (scheduler/headers.go).
	ForgedHeaders atomic.Int64
	// Runs counts calls into instances that carried more than one record
	// (batch_records), RunRecords the records they carried.
	Runs       atomic.Int64
	RunRecords atomic.Int64
	// HandedBack counts records a run gave back to the queues, not yet
	// run, because it went on past runHandBack (a slow record in it).
	HandedBack atomic.Int64

	TxnCommitted atomic.Int64 // transactions committed (exactly_once)
	TxnAborted   atomic.Int64 // transactions aborted (exactly_once): their records are processed again
	TxnSettled   atomic.Int64 // aborted transactions whose end was unconfirmed, settled before the tasks restarted (scheduler/internal/commit/txn.go, settle)
	// Rebuilds counts the times the pipeline was rebuilt with a new
	// client because its member could not go on (rebuild.go).
	Rebuilds atomic.Int64

	StateWrites   atomic.Int64 // changelog records of succeeded records (their puts and deletes, and a stream time of its own)
	StateRestored atomic.Int64 // changelog records applied by restores at assignment
	StateRefused  atomic.Int64 // state_put calls refused because the partition's state is at state.max_bytes
	// StateRestoreSkipped counts changelog records a restore skipped: the
	// store cannot hold them (statestore.Check).
	StateRestoreSkipped atomic.Int64
	// StateFlushFailures counts flushes the local store refused after a
	// commit (the writes stayed in the overlay).
	StateFlushFailures atomic.Int64
	// StateRestoreNanos is the time restores at assignment took (wall
	// time: the partitions of one assignment are restored at once).
	StateRestoreNanos atomic.Int64
	// Event-time timers (ABI.md §4.2): TimersSet counts the timers set by
	// committed records and firings, TimersFired the firings that
	// succeeded, TimersFailed those dead-lettered, TimersIdleRounds the
	// stream-time advances of idle partitions (timers.idle_advance).
	TimersSet        atomic.Int64
	TimersFired      atomic.Int64
	TimersFailed     atomic.Int64
	TimersIdleRounds atomic.Int64

	// SchemaDecodeFailures counts input records whose key or value did
	// not decode with a schema registry's schema (input_format: confluent;
	// each failed its record), SchemaEncodeFailures records whose output
	// did not fit the output subject's schema.
	SchemaDecodeFailures atomic.Int64
	SchemaEncodeFailures atomic.Int64
}

// Counter picks one of a Stats' counters.
type Counter func(*Stats) *atomic.Int64

// Metrics are the runner's OpenTelemetry instruments. Most are observable:
// they read the pipelines' counters and gauges when collected, so the record
// path pays nothing for them; the processing-latency histogram is recorded
// per record. Labels are bounded: pipeline, topic, partition, instance slot
// and state, a version's digest and label (verlabel: at most 63 characters
// of a small alphabet; at most MaxRetiredVersions retired versions per
// pipeline besides the running ones) — never a key or an offset.
type Metrics struct {
	Latency     metric.Float64Histogram
	Compile     metric.Float64Histogram
	Instantiate metric.Float64Histogram
}

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

// Error kinds in the wasmstream.error.kind header
// (failhdr.ErrorKind) and FailureEvent.Kind.
const (
	KindGuestRetry = "guest.retry" // the guest returned a retryable failure
	KindGuestFail  = "guest.fail"  // the guest returned a terminal failure
	KindProduce    = "produce"     // an output could not be produced
	// Guest faults are "fault." + the host.FaultKind: fault.trap, fault.panic,
	// fault.exit, fault.deadline, fault.oom, fault.bad_pointer,
	// fault.protocol, fault.canceled.
)
