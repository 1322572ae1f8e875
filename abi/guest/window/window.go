// Package window is the Go SDK's event-time windows: tumbling, hopping and
// session windows with a grace period, emitting one final result per window
// when it closes (Kafka Streams' EmitStrategy.onWindowClose()). It runs over
// the ABI's two-part state keys, stream time and event-time timers (ABI.md
// §4.2), which it reaches through the small interface Host: a processor's
// tests run it over windowtest.Partition, an in-memory partition that keeps
// the ABI's firing rule, and a module over the host's functions
// (host_wasm.go) once the host serves them.
//
// The boundaries are Kafka Streams' (a differential test compares the final
// results with Kafka Streams'):
//
//   - Time windows (Tumbling, Hopping) are [start, start+size), their starts
//     the multiples of advance from the epoch (TimeWindows.windowsFor): a
//     record at exactly a window's end belongs to the next window, not to it.
//     A window is open while end + grace > stream time, the stream time
//     counting the record being added (KStreamWindowAggregate); it closes,
//     and its final result is emitted, once stream time reaches end + grace.
//   - Session windows are [start, end], both inclusive: a record at ts joins
//     (and merges) every session of its key with end >= ts - gap and start <=
//     ts + gap (SessionStore.findSessions). A session closes once stream time
//     passes end + gap + grace (KStreamSessionWindowAggregate: end < stream
//     time - gap - grace).
//   - Stream time is the partition's (ABI.md §4.2: the largest timestamp of
//     the records decided so far), so, as in Kafka Streams, one key's records
//     close the windows of every key of the partition.
//
// A record none of whose windows is open any more is late: it is counted
// (Stats) and, when the windows have a LateTopic, emitted there unchanged
// with the header window.late; otherwise it is dropped. A record with a
// negative timestamp fails terminally (it has no window: Kafka Streams'
// default extractor fails such a record too).
//
// Each window is one state entry, (record key, name | start) → aggregate,
// and each open window one timer, (record key, close time): the timer's
// firing emits the window's result and deletes the entry, so a closed
// window leaves no state behind. The state key is the record key itself,
// which is the record's partition's (ABI.md §4.1).
package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

// Host is the ABI calls windows run over (ABI.md §4.2), for the call in
// progress (a record's or a timer firing's). The state is the partition's:
// key must be the partition's (the record key is), sub is free. Errors are
// the calls' abi.Errno values.
type Host interface {
	// StreamTime is the partition's stream time in milliseconds: the
	// largest timestamp of its records decided so far, -1 before any. It
	// does not count the record in progress.
	StreamTime() (int64, error)
	// Get returns (key, sub)'s value and whether it has one.
	Get(key, sub []byte) ([]byte, bool, error)
	// Put sets (key, sub) to value.
	Put(key, sub, value []byte) error
	// Delete removes (key, sub).
	Delete(key, sub []byte) error
	// Scan calls fn for each sub of key with prefix, in sub order, until fn
	// returns false; sub and value are valid only during fn.
	Scan(key, prefix []byte, fn func(sub, value []byte) bool) error
	// SetTimer sets the timer (key, at), at in milliseconds of stream time;
	// setting it again is one timer.
	SetTimer(key []byte, at int64) error
	// DeleteTimer removes the timer (key, at), if set.
	DeleteTimer(key []byte, at int64) error
}

// Aggregator folds records into a window's aggregate, kept as bytes in the
// state. A nil agg is a new window's. Add and Merge must not keep agg or
// value: the bytes they return are the aggregate's from then on.
type Aggregator interface {
	// Add adds a record's value to agg.
	Add(agg, value []byte) ([]byte, error)
	// Merge combines the aggregates of two sessions that a record joins
	// (session windows only); a is the earlier session's.
	Merge(a, b []byte) ([]byte, error)
}

// Count counts records: its aggregate is a uint64, 8 bytes big-endian
// (DecodeCount). Its Add writes the new count into agg when agg holds one
// (the windows give it the bytes Host.Get returned, theirs to change), so
// a record's count allocates nothing.
var Count Aggregator = counter{}

type counter struct{}

func (counter) Add(agg, _ []byte) ([]byte, error) {
	n, err := decodeCount(agg)
	if err == nil && len(agg) == 8 {
		binary.BigEndian.PutUint64(agg, n+1)
		return agg, nil
	}
	return binary.BigEndian.AppendUint64(nil, n+1), err
}

func (counter) Merge(a, b []byte) ([]byte, error) {
	x, err := decodeCount(a)
	if err != nil {
		return nil, err
	}
	y, err := decodeCount(b)
	return binary.BigEndian.AppendUint64(nil, x+y), err
}

func decodeCount(b []byte) (uint64, error) {
	switch len(b) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("window: a count is 8 bytes, not %d", len(b))
}

// DecodeCount reads a Count aggregate.
func DecodeCount(agg []byte) (uint64, error) { return decodeCount(agg) }

// Result is a closed window's final result.
type Result struct {
	Key []byte
	// Start is the window's start in milliseconds. End is its end: exclusive
	// for time windows (start + size), inclusive for a session (its last
	// record's timestamp), as Kafka Streams' windows.
	Start, End int64
	Agg        []byte
}

// Stats counts what this instance's windows did (since it started: an
// instance is replaced after a fault, so these are a gauge of the
// instance, not a durable count).
type Stats struct {
	Records int64 // records added to at least one window
	Late    int64 // records in no open window (dropped, or sent to LateTopic)
	// Dropped counts (record, window) pairs refused because the window had
	// closed, like Kafka Streams' dropped-records metric: a hopping
	// window's record may be too late for its earliest windows only.
	Dropped int64
	Closed  int64 // final results emitted
}

// Options are what every kind of window has.
type Options struct {
	// Name tells this processor's windows apart in the state and its
	// timers: it prefixes every window's sub key. Required; no 0 byte.
	Name string
	// Grace is how long after its end a window still takes records.
	Grace time.Duration
	// Agg aggregates records; nil is Count.
	Agg Aggregator
	// Output is the topic of the final results ("" the pipeline's output);
	// OnClose, when set, emits them instead.
	Output  string
	OnClose func(r Result, out guest.Emitter) error
	// LateTopic, when set, receives each late record (its key, value and
	// headers, and the header window.late naming Name); otherwise late
	// records are dropped, and counted either way.
	LateTopic string
}

// HeaderLate marks a late record sent to LateTopic; its value is the
// windows' Name. HeaderStart and HeaderEnd carry a default final result's
// window bounds (decimal milliseconds).
const (
	HeaderLate  = "window.late"
	HeaderStart = "window.start"
	HeaderEnd   = "window.end"
)

// ErrNegativeTimestamp fails a record (terminally) whose timestamp is
// before the epoch: it has no window.
var ErrNegativeTimestamp = errors.New("window: record timestamp is negative")

func ms(d time.Duration, what string) (int64, error) {
	if d < 0 || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("window: %s %v: must be a non-negative whole number of milliseconds", what, d)
	}
	return d.Milliseconds(), nil
}

func (o *Options) check() (grace int64, err error) {
	if o.Name == "" {
		return 0, errors.New("window: Options.Name is required")
	}
	for i := 0; i < len(o.Name); i++ {
		if o.Name[i] == 0 {
			return 0, fmt.Errorf("window: Options.Name %q has a 0 byte", o.Name)
		}
	}
	if o.Agg == nil {
		o.Agg = Count
	}
	return ms(o.Grace, "Grace")
}

// subPrefix is the sub keys' prefix of the windows named name: name | 0.
func subPrefix(name string) []byte { return append([]byte(name), 0) }

// appendStart appends a window start so that sub keys sort by start: big
// endian with the sign bit flipped.
func appendStart(b []byte, start int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(start)^(1<<63))
}

func readStart(sub []byte, prefixLen int) (int64, bool) {
	if len(sub) != prefixLen+8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(sub[prefixLen:]) ^ (1 << 63)), true
}

// base is what every kind of window shares.
type base struct {
	opt    Options
	grace  int64
	prefix []byte
	stats  Stats
}

// Stats returns the counts so far.
func (b *base) Stats() Stats { return b.stats }

// streamTime is the stream time a record sees: the partition's, or the
// record's own timestamp when later (Kafka Streams advances stream time
// before it looks at the record's windows).
func streamTime(h Host, ts int64) (int64, error) {
	st, err := h.StreamTime()
	if err != nil {
		return 0, err
	}
	return max(st, ts), nil
}

func recordTime(r *guest.Record, name string) (int64, error) {
	ts := r.Timestamp.UnixMilli()
	if ts < 0 {
		return 0, guest.Terminal(fmt.Errorf("%w: windows %q, timestamp %d", ErrNegativeTimestamp, name, ts))
	}
	return ts, nil
}

func (b *base) late(r *guest.Record, out guest.Emitter) error {
	b.stats.Late++
	if b.opt.LateTopic == "" {
		return nil
	}
	hs := append(append([]guest.Header{}, r.Headers...), guest.Header{Key: HeaderLate, Value: []byte(b.opt.Name)})
	return out.Emit(guest.Output{Topic: b.opt.LateTopic, Key: r.Key, Value: r.Value, Headers: hs})
}

func (b *base) emit(res Result, out guest.Emitter) error {
	b.stats.Closed++
	if b.opt.OnClose != nil {
		return b.opt.OnClose(res, out)
	}
	// Both numbers in one allocation: start, then end.
	nums := strconv.AppendInt(make([]byte, 0, 40), res.Start, 10)
	n := len(nums)
	nums = strconv.AppendInt(nums, res.End, 10)
	return out.Emit(guest.Output{Topic: b.opt.Output, Key: res.Key, Value: res.Agg, Headers: []guest.Header{
		{Key: HeaderStart, Value: nums[:n:n]},
		{Key: HeaderEnd, Value: nums[n:]},
	}})
}

// classify names the windows in an ABI error and makes the ones a retry
// cannot cure terminal, so the record goes to the dead-letter topic instead
// of being retried for ever: a key too long for the state (over 1024
// bytes), a key of another partition (a null or re-keyed record's key:
// ABI.md §4.1), a pipeline without state, a topic not allowed. A limit
// (abi.ErrnoLimit) stays retryable: the host may hold fewer outputs later.
func (b *base) classify(err error) error {
	if err == nil {
		return nil // before e: errors.As makes e an allocation of every call
	}
	var e abi.Errno
	if guest.IsTerminal(err) || !errors.As(err, &e) {
		return err
	}
	err = fmt.Errorf("window: windows %q: %w", b.opt.Name, err)
	switch e {
	case abi.ErrnoTooLarge, abi.ErrnoWrongKey, abi.ErrnoNoState, abi.ErrnoTopicDenied, abi.ErrnoBadEncoding, abi.ErrnoNotSupported:
		return guest.Terminal(err)
	}
	return err
}

// overflows reports whether a+b passes math.MaxInt64 (a, b >= 0).
func overflows(a, b int64) bool { return a > math.MaxInt64-b }
