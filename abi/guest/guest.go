// Package guest is the Go SDK for writing wasmstream processors.
//
// A processor is an ordinary Go function from a record to emitted records and
// an outcome:
//
//	func main() {}
//
//	func init() {
//		guest.Process(func(r *guest.Record, out guest.Emitter) error {
//			return out.Emit(guest.Output{Key: r.Key, Value: bytes.ToUpper(r.Value)})
//		})
//	}
//
// Build it with the standard Go toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o proc.wasm .
//
// Built for any other target (go test on the host), the same code runs
// without a WASM runtime: Run calls the registered function the way the host
// would and returns what it emitted and its outcome, so a processor is unit
// tested like any Go function.
//
// Outcomes: a nil error means success and releases what was emitted. Any
// other error fails the record and discards what it emitted: the record is
// retried (a retryable failure) unless the error is marked with Terminal.
// A panic, an out-of-memory or a deadline is a fault: the record fails and
// the host replaces the instance.
//
// Cost: the SDK's own path for a record allocates nothing in the guest, one
// record a call or many in a batch (ABI.md §10): the record's buffer, its
// decoded form (r and its Headers' array) and the output list are reused
// from one record to the next, which is why r and its slices are the
// processor's only until it returns (a record that returns Pending keeps
// its own until it is decided, then they go to the next record that waits).
// What the processor allocates is its own: it may change r.Value in place
// and emit it (TestGoSDKRecordPathAllocationFree counts the guest's
// allocations). A record that waits on an operation costs the SDK's path
// its emitter, the result's buffer and, for HTTP, the decoded response
// (TestGoSDKAsyncPathAllocations); Await and Emit copy what they are given,
// so a processor may build requests and outputs in buffers it reuses.
package guest

import (
	"errors"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// Header is a Kafka record header; a nil Value is a null value.
type Header = abi.Header

// Record is the record being processed. Its byte slices are only valid until
// the processing function returns: copy what must outlive the call. They are
// the processor's own copy of the record: it may change them in place and
// emit them (Emit copies), which spares an allocation per record.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// Attempt is 1 on the first attempt and counts up on each retry.
	Attempt int
	Key     []byte // nil: null key
	Value   []byte // nil: null value
	Headers []Header
}

// IdempotencyKey identifies the record across its attempts, retry topics
// included: "<topic>/<partition>/<offset>" of where it was first consumed.
// Pass it to external services that deduplicate requests: a retried record,
// or one processed again after its exactly_once transaction aborted, repeats
// its side effects, and Kafka cannot undo an HTTP call (ABI.md §7.4).
func (r *Record) IdempotencyKey() string {
	return string(r.AppendIdempotencyKey(nil))
}

// AppendIdempotencyKey appends the record's IdempotencyKey to b: a header
// value built without an allocation when b has room.
func (r *Record) AppendIdempotencyKey(b []byte) []byte {
	b = append(b, r.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, r.Offset, 10)
}

// Header returns the value of the first header named key, and whether there
// is one.
func (r *Record) Header(key string) ([]byte, bool) {
	for i := range r.Headers {
		if r.Headers[i].Key == key {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// Output is a record to produce. An empty Topic means the pipeline's output
// topic; another topic must be allowed by the pipeline's configuration.
type Output struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers []Header
	// Partition, when set with a value >= 0 through WithPartition, pins the
	// output partition; otherwise the host partitions by key.
	partition int32
	pinned    bool
}

// WithPartition returns o pinned to partition p.
func (o Output) WithPartition(p int32) Output {
	o.partition, o.pinned = p, true
	return o
}

// Emitter takes a record's outputs. Outputs are held by the host and
// produced only if the record succeeds. Emit copies what it is given.
//
// The module also exports the batch entry (ABI.md §10), through which the
// host may run several records in one call, each with its own Emitter.
// There, Emit keeps a record's first 64 outputs (64 KiB) and hands them
// over with the record's outcome: an output the host refuses (a limit, a
// topic not allowed) then fails the record when it ends — retryably for a
// limit, as returning Emit's error would — instead of being Emit's error.
type Emitter interface {
	Emit(Output) error
}

// Func processes one record.
type Func func(r *Record, out Emitter) error

var processor Func

// Process registers fn as the module's processor. Call it once, from init.
func Process(fn Func) {
	if processor != nil {
		panic("guest: Process called twice")
	}
	processor = fn
}

type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal marks err as a terminal failure: the record is not retried and goes
// straight to the dead-letter topic.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// IsTerminal reports whether err was marked with Terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}

// status maps a processing error to its ABI status.
func status(err error) abi.Status {
	switch {
	case err == nil:
		return abi.StatusOK
	case IsTerminal(err):
		return abi.StatusFail
	default:
		return abi.StatusRetry
	}
}

func toABIOutput(o *Output) abi.Output {
	p := int32(-1)
	if o.pinned {
		p = o.partition
	}
	return abi.Output{Topic: o.Topic, Partition: p, Key: o.Key, Value: o.Value, Headers: o.Headers}
}

func fromABIRecord(ar *abi.Record, r *Record) {
	*r = Record{
		Topic:     ar.Topic,
		Partition: ar.Partition,
		Offset:    ar.Offset,
		Timestamp: time.UnixMilli(ar.Timestamp),
		Attempt:   int(ar.Attempt),
		Key:       ar.Key,
		Value:     ar.Value,
		Headers:   ar.Headers,
	}
}
