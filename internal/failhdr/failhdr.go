// Package failhdr is the one codec of the headers wasmstream puts on the copy
// of a failed record it produces to a retry topic or to the dead-letter topic:
// where the record was first consumed, which attempt it is on, when and why
// each attempt failed.
//
// The scheduler encodes them (task.fail) and decodes them on its own retry
// topics (the retry workers); `wasmstream dlq` decodes them to list, show and
// redrive dead letters. Nothing else reads or writes them. Headers in the
// namespace are only believed on topics the host writes (retry topics and
// the dead-letter topic): on an input topic anyone can set them, and the
// scheduler drops them there (RATIONALE.md, "Retries", on what a header in
// the wasmstream. namespace is worth).
//
// Encode and Decode are pure and safe for concurrent use. Decode never fails
// outright: it reads what it can and reports the rest, because a record with
// a bad header must still be processed (or listed, or skipped with a reason)
// rather than stop the host or the command.
package failhdr

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names. Values are UTF-8 text.
const (
	Prefix            = "wasmstream."         // starts every header wasmstream adds
	Pipeline          = "wasmstream.pipeline" // the pipeline whose attempt failed
	ErrorKind         = "wasmstream.error.kind"
	Error             = "wasmstream.error"
	OriginalTopic     = "wasmstream.original.topic"
	OriginalPartition = "wasmstream.original.partition"
	OriginalOffset    = "wasmstream.original.offset"
	OriginalTimestamp = "wasmstream.original.timestamp" // milliseconds since the Unix epoch
	Attempt           = "wasmstream.attempt"
	ModuleDigest      = "wasmstream.module.digest"
	FailedAt          = "wasmstream.failed.at"     // RFC 3339
	FirstFailure      = "wasmstream.first.failure" // RFC 3339: when the first attempt failed
	Due               = "wasmstream.due"           // retry copies: when the next attempt is due, ms since the Unix epoch
	// HistoryPrefix + N carries "<kind>: <error>" of failed attempt N, one
	// header per attempt.
	HistoryPrefix = "wasmstream.history."
	// RedrivenFrom marks a record `wasmstream dlq redrive` sent back:
	// "<topic>[<partition>]@<offset>" of its dead letter. Informational: the
	// host never acts on it.
	RedrivenFrom = "wasmstream.redriven.from"
	// SchemaID is the schema-registry schema id a schema.* failure was
	// about (the id in the record's frame, or the output subject's
	// schema): decimal. Written only for such a failure that knows it.
	SchemaID = "wasmstream.schema.id"
	// ModuleLabel is the label (deploy --label) of the version
	// ModuleDigest names, when it has one: `dlq list --version` and
	// `dlq redrive --version` select by it.
	ModuleLabel = "wasmstream.module.label"
)

// MaxAttempt bounds the attempt numbers Decode accepts (retry.max_attempts is
// at most 100; each redrive to a retry tier adds one).
const MaxAttempt = 1 << 20

// MaxHistoryEntry bounds the bytes of one history entry Encode writes.
const MaxHistoryEntry = 1024

// Origin is where a record was first consumed: what the guest sees as the
// record's coordinates on every attempt, and its idempotency key.
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp int64 // ms since the Unix epoch
}

// Entry is one failed attempt in a record's history.
type Entry struct {
	Attempt int
	Text    string // "<kind>: <error>"
}

// State is what the headers of a failure copy say.
type State struct {
	Pipeline     string
	Kind         string // error kind of the last failure (scheduler.Kind*)
	Error        string // its message
	Origin       Origin
	Attempt      int // retry copy: the attempt it is due for; dead letter: the last attempt made
	ModuleDigest string
	ModuleLabel  string    // "": none (no header)
	FailedAt     time.Time // when the last attempt failed
	FirstFailure time.Time
	Due          time.Time // retry copies: when the next attempt is due (zero: not set)
	History      []Entry   // by attempt, ascending, no duplicates
	RedrivenFrom string
	SchemaID     int // 0: not about a schema id (no header)
}

// NewEntry is the history entry of a failure: "<kind>: <msg>", cut to
// MaxHistoryEntry bytes (on a rune boundary).
func NewEntry(attempt int, kind, msg string) Entry {
	e := kind + ": " + msg
	if len(e) > MaxHistoryEntry {
		n := MaxHistoryEntry
		for n > 0 && e[n]&0xC0 == 0x80 {
			n--
		}
		e = e[:n]
	}
	return Entry{attempt, e}
}

// Own returns the headers of hs outside the wasmstream. namespace (the
// record's own, its trace context among them), in order.
func Own(hs []kgo.RecordHeader) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(hs))
	for _, h := range hs {
		if !strings.HasPrefix(h.Key, Prefix) {
			out = append(out, h)
		}
	}
	return out
}

// Encode appends st's headers to dst. Zero Due, empty RedrivenFrom and
// ModuleLabel and zero SchemaID are left out; every other field is
// written.
func Encode(dst []kgo.RecordHeader, st *State) []kgo.RecordHeader {
	for _, e := range st.History {
		dst = append(dst, kgo.RecordHeader{Key: HistoryPrefix + strconv.Itoa(e.Attempt), Value: []byte(e.Text)})
	}
	dst = append(dst,
		kgo.RecordHeader{Key: Pipeline, Value: []byte(st.Pipeline)},
		kgo.RecordHeader{Key: ErrorKind, Value: []byte(st.Kind)},
		kgo.RecordHeader{Key: Error, Value: []byte(st.Error)},
		kgo.RecordHeader{Key: OriginalTopic, Value: []byte(st.Origin.Topic)},
		kgo.RecordHeader{Key: OriginalPartition, Value: strconv.AppendInt(nil, int64(st.Origin.Partition), 10)},
		kgo.RecordHeader{Key: OriginalOffset, Value: strconv.AppendInt(nil, st.Origin.Offset, 10)},
		kgo.RecordHeader{Key: OriginalTimestamp, Value: strconv.AppendInt(nil, st.Origin.Timestamp, 10)},
		kgo.RecordHeader{Key: Attempt, Value: strconv.AppendInt(nil, int64(st.Attempt), 10)},
		kgo.RecordHeader{Key: FirstFailure, Value: []byte(st.FirstFailure.UTC().Format(time.RFC3339Nano))},
		kgo.RecordHeader{Key: ModuleDigest, Value: []byte(st.ModuleDigest)},
		kgo.RecordHeader{Key: FailedAt, Value: []byte(st.FailedAt.UTC().Format(time.RFC3339Nano))},
	)
	if !st.Due.IsZero() {
		dst = append(dst, kgo.RecordHeader{Key: Due, Value: strconv.AppendInt(nil, st.Due.UnixMilli(), 10)})
	}
	if st.ModuleLabel != "" {
		dst = append(dst, kgo.RecordHeader{Key: ModuleLabel, Value: []byte(st.ModuleLabel)})
	}
	if st.RedrivenFrom != "" {
		dst = append(dst, kgo.RecordHeader{Key: RedrivenFrom, Value: []byte(st.RedrivenFrom)})
	}
	if st.SchemaID != 0 {
		dst = append(dst, kgo.RecordHeader{Key: SchemaID, Value: strconv.AppendInt(nil, int64(st.SchemaID), 10)})
	}
	return dst
}

// HeaderError is a wasmstream header Decode could not use.
type HeaderError struct {
	Key    string
	Reason string
}

func (e *HeaderError) Error() string { return e.Key + ": " + e.Reason }

// Errors lists the headers Decode could not use, in the order met.
type Errors []*HeaderError

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns each error, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// required are the headers every failure copy carries.
var required = []string{Pipeline, ErrorKind, Error, OriginalTopic, OriginalPartition, OriginalOffset, OriginalTimestamp, Attempt, FirstFailure, FailedAt}

// Decode reads the wasmstream headers in hs (the others are ignored, as are
// unknown names in the namespace). A header it cannot use — malformed,
// repeated, or required and missing — leaves its field zero and is listed in
// the returned error, of type Errors; a nil error means st is complete.
func Decode(hs []kgo.RecordHeader) (st State, err error) {
	d := decoder{seen: map[string]bool{}, history: map[int]bool{}}
	for _, h := range hs {
		if !strings.HasPrefix(h.Key, Prefix) {
			continue
		}
		v := string(h.Value)
		if strings.HasPrefix(h.Key, HistoryPrefix) {
			d.historyEntry(h.Key, v)
			continue
		}
		if d.seen[h.Key] {
			d.bad(h.Key, "repeated")
			continue
		}
		d.seen[h.Key] = true
		d.header(h.Key, v)
	}
	for _, k := range required {
		if !d.seen[k] {
			d.bad(k, "missing")
		}
	}
	sort.Slice(d.st.History, func(i, j int) bool { return d.st.History[i].Attempt < d.st.History[j].Attempt })
	if len(d.errs) > 0 {
		return d.st, d.errs
	}
	return d.st, nil
}

// decoder is Decode's state: what the headers read so far say, the
// headers it cannot use, and the names and history entries seen.
type decoder struct {
	st      State
	errs    Errors
	seen    map[string]bool
	history map[int]bool
}

// bad lists header key as unusable, and why.
func (d *decoder) bad(key, format string, args ...any) {
	d.errs = append(d.errs, &HeaderError{Key: key, Reason: fmt.Sprintf(format, args...)})
}

// historyEntry reads the history header key (HistoryPrefix + N).
func (d *decoder) historyEntry(key, v string) {
	n, ok := attemptNumber(key[len(HistoryPrefix):])
	switch {
	case !ok:
		d.bad(key, "not an attempt number after %s", HistoryPrefix)
	case d.history[n]:
		d.bad(key, "repeated")
	default:
		d.history[n] = true
		d.st.History = append(d.st.History, Entry{n, v})
	}
}

// header reads the header key, the first of its name; an unknown name is
// ignored.
func (d *decoder) header(key, v string) {
	st := &d.st
	switch key {
	case Pipeline:
		st.Pipeline = v
	case ErrorKind:
		st.Kind = v
	case Error:
		st.Error = v
	case ModuleDigest:
		st.ModuleDigest = v
	case ModuleLabel:
		st.ModuleLabel = v
	case RedrivenFrom:
		st.RedrivenFrom = v
	case OriginalTopic, OriginalPartition, OriginalOffset, OriginalTimestamp:
		d.origin(key, v)
	case Attempt:
		n, ok := attemptNumber(v)
		if !ok {
			d.bad(key, "%s is not an attempt number (1 to %d)", quote(v), MaxAttempt)
		}
		st.Attempt = n
	case FailedAt, FirstFailure:
		t, e := time.Parse(time.RFC3339Nano, v)
		if e != nil {
			d.bad(key, "%s is not an RFC 3339 time", quote(v))
			t = time.Time{}
		}
		if key == FailedAt {
			st.FailedAt = t.UTC()
		} else {
			st.FirstFailure = t.UTC()
		}
	case SchemaID:
		n, e := strconv.ParseInt(v, 10, 32)
		if e != nil || n <= 0 {
			d.bad(key, "%s is not a schema id", quote(v))
			n = 0
		}
		st.SchemaID = int(n)
	case Due:
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil {
			d.bad(key, "%s is not a time in milliseconds", quote(v))
		} else {
			st.Due = time.UnixMilli(n)
		}
	}
}

// origin reads one of the Original* headers, into st.Origin.
func (d *decoder) origin(key, v string) {
	o := &d.st.Origin
	switch key {
	case OriginalTopic:
		if v == "" {
			d.bad(key, "empty")
		}
		o.Topic = v
	case OriginalPartition:
		n, e := strconv.ParseInt(v, 10, 32)
		if e != nil || n < 0 {
			d.bad(key, "%s is not a partition", quote(v))
			n = 0
		}
		o.Partition = int32(n)
	case OriginalOffset:
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil || n < 0 {
			d.bad(key, "%s is not an offset", quote(v))
			n = 0
		}
		o.Offset = n
	case OriginalTimestamp:
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil {
			d.bad(key, "%s is not a time in milliseconds", quote(v))
			n = 0
		}
		o.Timestamp = n
	}
}

// DueAt is when a retry copy's next attempt is due, from its Due header (the
// last one); zero if it has none or it is malformed. It is Decode's reading
// of Due alone, for the retry workers' scheduling, which asks it often.
func DueAt(hs []kgo.RecordHeader) time.Time {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == Due {
			ms, err := strconv.ParseInt(string(hs[i].Value), 10, 64)
			if err != nil {
				return time.Time{}
			}
			return time.UnixMilli(ms)
		}
	}
	return time.Time{}
}

// attemptNumber parses a decimal attempt number in [1, MaxAttempt], digits
// only (no sign, no leading zero), so that it encodes back to itself.
func attemptNumber(s string) (int, bool) {
	if s == "" || len(s) > 7 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > MaxAttempt {
		return 0, false
	}
	return n, true
}

// quote shows a header value in an error: quoted (control characters
// escaped) and cut to 64 bytes.
func quote(v string) string {
	if len(v) > 64 {
		return strconv.Quote(v[:64]) + "…"
	}
	return strconv.Quote(v)
}

// Unusable reports whether err (from Decode) names key: missing, repeated or
// malformed.
func Unusable(err error, key string) bool {
	var es Errors
	if !errors.As(err, &es) {
		return false
	}
	for _, e := range es {
		if e.Key == key {
			return true
		}
	}
	return false
}
