package dashboard

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/scheduler"
)

// Entry is one failed attempt kept for the failed-records list.
type Entry struct {
	ID       uint64 `json:"id"`
	At       int64  `json:"at"` // Unix ms
	Pipeline string `json:"pipeline"`
	Primary  string `json:"primary"` // the pipeline it belongs to (a retry tier's primary)
	Record   string `json:"record"`  // where it was first consumed: topic[partition]@offset
	Consumed string `json:"consumed"`
	Key      string `json:"key"`
	Kind     string `json:"kind"`
	Error    string `json:"error"`
	Attempt  int    `json:"attempt"`
	Dest     string `json:"dest"`
	Retry    bool   `json:"retry"`
	Due      int64  `json:"due,omitempty"` // Unix ms
	TraceID  string `json:"trace_id,omitempty"`
	// Value is a preview of the record's value: its first bytes
	// (scheduler.MaxEventValueBytes) with anything unprintable escaped
	// (escaped), cut to maxPreview bytes; ValueSize is the
	// whole value's length (-1: null).
	Value      string        `json:"value"`
	ValueSize  int           `json:"value_size"`
	Headers    []headerEntry `json:"headers,omitempty"`
	HeadersCut int           `json:"headers_cut,omitempty"` // headers not kept
	Module     string        `json:"module,omitempty"`      // the version that ran the attempt (digest)
	Canary     bool          `json:"canary,omitempty"`      // that version was the canary
	originKey  originKey
}

// headerEntry is one of a record's own headers, escaped as Entry.Value.
type headerEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Bounds of the text an entry holds beyond the event's own bounds: a
// value's preview and a header's value after escaping. With
// scheduler.MaxEventKeyBytes, MaxEventErrorBytes, MaxEventHeaders of
// MaxEventHeaderBytes, an entry holds at most entryMaxBytes of text, so
// the ring of Config.Failed (100) entries at most 100 × 2.9 KB.
const (
	maxPreview       = 256
	maxHeaderPreview = 128
	entryMaxBytes    = (scheduler.MaxEventKeyBytes+3)*2 + scheduler.MaxEventErrorBytes + maxPreview + 3 +
		scheduler.MaxEventHeaders*(scheduler.MaxEventKeyBytes+3+maxHeaderPreview+3) + 4*64 + 200
)

type originKey struct {
	primary, topic string
	partition      int32
	offset         int64
}

// maxKinds bounds the error kinds counted per pipeline; further kinds
// count under "other" (the kinds are a fixed set today).
const maxKinds = 32

// ring keeps the newest failed attempts, and dead letters counted by
// pipeline and error kind since the host started. Safe for concurrent use;
// its lock is a leaf (nothing else is locked while it is held).
type ring struct {
	mu     sync.Mutex
	buf    []Entry // circular, len == cap once full
	next   int     // where the next entry goes once full
	seq    uint64
	byKind map[string]map[string]int64 // primary -> kind -> dead letters
}

func newRing(n int) *ring {
	return &ring{buf: make([]Entry, 0, n), byKind: map[string]map[string]int64{}}
}

func (r *ring) add(e *scheduler.FailureEvent) {
	primary := strings.TrimSuffix(e.Pipeline, ".retry")
	en := Entry{At: e.At.UnixMilli(), Pipeline: e.Pipeline, Primary: primary,
		Record:   origin(e.OriginTopic, e.OriginPartition, e.OriginOffset),
		Consumed: origin(e.Topic, e.Partition, e.Offset),
		Key:      printableKey(e.Key, e.KeyTruncated), Kind: e.Kind, Error: e.Error, Attempt: e.Attempt,
		Dest: e.Dest, Retry: e.Retry, TraceID: e.TraceID,
		Value: escaped(e.Value, maxPreview, e.ValueSize > len(e.Value)), ValueSize: e.ValueSize, HeadersCut: e.HeadersCut,
		Module: e.ModuleDigest, Canary: e.Canary,
		originKey: originKey{primary, e.OriginTopic, e.OriginPartition, e.OriginOffset}}
	if e.Retry {
		en.Due = e.Due.UnixMilli()
	}
	for _, h := range e.Headers {
		en.Headers = append(en.Headers, headerEntry{Key: escaped([]byte(h.Key), scheduler.MaxEventKeyBytes, false), Value: escaped(h.Value, maxHeaderPreview, h.Cut)})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	en.ID = r.seq
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, en)
	} else {
		r.buf[r.next] = en
		r.next = (r.next + 1) % len(r.buf)
	}
	if !e.Retry {
		m := r.byKind[primary]
		if m == nil {
			m = map[string]int64{}
			r.byKind[primary] = m
		}
		k := e.Kind
		if _, ok := m[k]; !ok && len(m) >= maxKinds {
			k = "other"
		}
		m[k]++
	}
}

// newest returns the entries, newest first.
func (r *ring) newest() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Entry, 0, len(r.buf))
	for i := len(r.buf) - 1; i >= 0; i-- {
		out = append(out, r.buf[(r.next+i)%len(r.buf)])
	}
	return out
}

// get returns the entry id and every kept entry of the same record (same
// pipeline and origin), oldest first.
func (r *ring) get(id uint64) (Entry, []Entry, bool) {
	all := r.newest()
	var e Entry
	found := false
	for _, x := range all {
		if x.ID == id {
			e, found = x, true
			break
		}
	}
	if !found {
		return Entry{}, nil, false
	}
	var same []Entry
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].originKey == e.originKey {
			same = append(same, all[i])
		}
	}
	return e, same, true
}

// deadByKind returns a copy of the dead-letter counts of primary.
func (r *ring) deadByKind(primary string) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.byKind[primary]))
	for k, n := range r.byKind[primary] {
		out[k] = n
	}
	return out
}

func origin(topic string, partition int32, offset int64) string {
	return topic + "[" + itoa(int64(partition)) + "]@" + itoa(offset)
}

// printableKey is the key as text: valid UTF-8 kept, anything else
// replaced, "…" when it was cut.
func printableKey(k []byte, cut bool) string {
	s := strings.ToValidUTF8(string(k), "\uFFFD")
	if cut {
		s += "…"
	}
	return s
}

// escaped is b as text: printable characters as they are, anything else
// (control bytes, bytes that are not UTF-8) as an escape (\n, \x00), cut
// to n bytes between characters, "…" added when cut (or when more was
// said to follow).
func escaped(b []byte, n int, more bool) string {
	var out strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		var tok string
		switch {
		case r == utf8.RuneError && size <= 1:
			tok = fmt.Sprintf("\\x%02x", b[0])
		case r == '\n':
			tok = "\\n"
		case r == '\t':
			tok = "\\t"
		case r == '\r':
			tok = "\\r"
		case !unicode.IsPrint(r) && r != ' ':
			tok = strings.Trim(strconv.QuoteRune(r), "'")
		default:
			tok = string(b[:size])
		}
		if out.Len()+len(tok) > n {
			more = true
			break
		}
		out.WriteString(tok)
		b = b[size:]
	}
	if more {
		out.WriteString("…")
	}
	return out.String()
}

// dueSummary counts a tier's retries routed there that are not due yet and
// the earliest due time among them (Unix ms, 0 when none).
func (r *ring) dueSummary(now time.Time) map[string][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][2]int64{}
	ms := now.UnixMilli()
	for _, e := range r.buf {
		if !e.Retry || e.Due <= ms {
			continue
		}
		s := out[e.Dest]
		s[0]++
		if s[1] == 0 || e.Due < s[1] {
			s[1] = e.Due
		}
		out[e.Dest] = s
	}
	return out
}
