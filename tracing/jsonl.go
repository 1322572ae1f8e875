package tracing

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/internal/jsonw"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Span is a finished span as the JSON-lines exporter writes it (one object
// per line) and as `wasmstream trace` reads it back, from the file or from
// Jaeger.
type Span struct {
	TraceID  string            `json:"trace_id"`
	SpanID   string            `json:"span_id"`
	ParentID string            `json:"parent_id,omitempty"`
	Name     string            `json:"name"`
	Kind     string            `json:"kind"`
	Start    time.Time         `json:"start"`
	End      time.Time         `json:"end"`
	Attrs    map[string]string `json:"attrs,omitempty"`
	Error    string            `json:"error,omitempty"` // the status description of a failed span
	Service  string            `json:"service,omitempty"`
}

// Duration is End - Start.
func (s *Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// jsonlExporter writes spans as JSON lines. It encodes by appending to one
// buffer: encoding/json's reflection over Span and its attribute map was
// half the cost of tracing a record (BenchmarkTracedRecord).
type jsonlExporter struct {
	mu    sync.Mutex
	w     *bufio.Writer
	buf   []byte
	attrs jsonAttrs // the attributes of the span being written
	// the second of the last time written, and its text
	sec     int64
	secText []byte
	// file is the tracing.file w writes to, rotated between batches
	// (rotate.go); nil for another writer.
	file *rotatingFile
}

// NewJSONLExporter returns an exporter writing one JSON object per span to w.
func NewJSONLExporter(w io.Writer) sdktrace.SpanExporter {
	return &jsonlExporter{w: bufio.NewWriterSize(w, 64<<10)}
}

func (e *jsonlExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		e.buf = appendSpanJSON(e.buf[:0], s)
		if _, err := e.w.Write(e.buf); err != nil {
			return err
		}
		if err := e.rotateIfDue(); err != nil {
			return err
		}
	}
	if cap(e.buf) > 1<<20 {
		e.buf = nil // one huge span does not pin its buffer
	}
	return e.flush()
}

// flush writes the batch out.
func (e *jsonlExporter) flush() error { return e.w.Flush() }

// rotateIfDue rotates the file once it has reached its size with the
// lines buffered: after a whole line, so each part holds whole lines and
// is at most the size and a line more.
func (e *jsonlExporter) rotateIfDue() error {
	if e.file == nil || !e.file.dueWith(int64(e.w.Buffered())) {
		return nil
	}
	if err := e.w.Flush(); err != nil {
		return err
	}
	return e.file.rotate()
}

// writeSpans writes the batcher's spans, encoding them from their facts:
// the same lines as ExportSpans writes for their SDK snapshots
// (TestFastJSONMatchesSnapshot) at a fraction of the cost.
func (e *jsonlExporter) writeSpans(spans []span, service string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range spans {
		e.buf = e.appendSpan(e.buf[:0], &spans[i], service)
		if _, err := e.w.Write(e.buf); err != nil {
			return err
		}
		if err := e.rotateIfDue(); err != nil {
			return err
		}
	}
	if cap(e.buf) > 1<<20 {
		e.buf = nil
	}
	return e.flush()
}

// appendSpan appends s as one line of the Span format.
func (e *jsonlExporter) appendSpan(b []byte, s *span, service string) []byte {
	b = append(b, `{"trace_id":"`...)
	tid := s.sc.TraceID()
	b = hex.AppendEncode(b, tid[:])
	b = append(b, `","span_id":"`...)
	sid := s.sc.SpanID()
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '"')
	if s.parent.IsValid() {
		b = append(b, `,"parent_id":"`...)
		pid := s.parent.SpanID()
		b = hex.AppendEncode(b, pid[:])
		b = append(b, '"')
	}
	b = append(b, `,"name":"`...)
	b = append(b, s.prefix...) // ASCII, nothing to escape
	n := len(b)
	b = jsonw.AppendString(b, s.subject)
	b = b[:n+copy(b[n:], b[n+1:])] // without the subject's opening quote
	b = append(b, `,"kind":"`...)
	b = append(b, s.spanKind().String()...)
	b = append(b, `","start":"`...)
	b = e.appendTime(b, s.start)
	b = append(b, `","end":"`...)
	b = e.appendTime(b, s.end)
	b = append(b, '"')
	e.attrs.b, e.attrs.n = b, 0
	e.attrs.b = append(e.attrs.b, `,"attrs":{`...)
	s.attrs(&e.attrs)
	b = e.attrs.b
	if e.attrs.n == 0 {
		b = b[:len(b)-len(`,"attrs":{`)]
	} else {
		b = append(b, '}')
	}
	e.attrs.b = nil
	if s.failed {
		msg := s.status
		if msg == "" {
			msg = "error"
		}
		b = append(b, `,"error":`...)
		b = jsonw.AppendString(b, msg)
	}
	if service != "" {
		b = append(b, `,"service":`...)
		b = jsonw.AppendString(b, service)
	}
	return append(b, '}', '\n')
}

// appendTime appends t in UTC as RFC 3339 with nanoseconds, as
// time.Time's JSON encoding writes it (TestAppendTime). The date and time
// of day are formatted once per second: spans come a second at a time.
func (e *jsonlExporter) appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	if sec := t.Unix(); sec != e.sec || len(e.secText) == 0 {
		e.sec, e.secText = sec, t.Truncate(time.Second).AppendFormat(e.secText[:0], "2006-01-02T15:04:05")
	}
	b = append(b, e.secText...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, 'Z')
}

// jsonAttrs writes attributes as members of a JSON object of strings, as
// appendSpanJSON writes an SDK span's. Keys are wasmstream's own ASCII
// names and are written as they are.
type jsonAttrs struct {
	b []byte
	n int // members written
}

func (j *jsonAttrs) key(k string) {
	if j.n > 0 {
		j.b = append(j.b, ',')
	}
	j.n++
	j.b = append(j.b, '"')
	j.b = append(j.b, k...)
	j.b = append(j.b, '"', ':')
}

func (j *jsonAttrs) str(k, v string) {
	j.key(k)
	j.b = jsonw.AppendString(j.b, v)
}

func (j *jsonAttrs) i64(k string, v int64) {
	j.key(k)
	j.b = append(j.b, '"')
	j.b = strconv.AppendInt(j.b, v, 10)
	j.b = append(j.b, '"')
}

// appendSpanJSON appends s as one line of the Span format, as
// encoding/json would write it (TestSpanJSONMatchesEncodingJSON).
func appendSpanJSON(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	b = append(b, `{"trace_id":"`...)
	tid := sc.TraceID()
	b = hex.AppendEncode(b, tid[:])
	b = append(b, `","span_id":"`...)
	sid := sc.SpanID()
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '"')
	if p := s.Parent(); p.IsValid() {
		b = append(b, `,"parent_id":"`...)
		pid := p.SpanID()
		b = hex.AppendEncode(b, pid[:])
		b = append(b, '"')
	}
	b = append(b, `,"name":`...)
	b = jsonw.AppendString(b, s.Name())
	b = append(b, `,"kind":`...)
	b = jsonw.AppendString(b, s.SpanKind().String())
	b = append(b, `,"start":"`...)
	b = s.StartTime().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","end":"`...)
	b = s.EndTime().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if attrs := s.Attributes(); len(attrs) > 0 {
		b = append(b, `,"attrs":{`...)
		for i, kv := range attrs {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonw.AppendString(b, string(kv.Key))
			b = append(b, ':')
			b = jsonw.AppendString(b, kv.Value.Emit())
		}
		b = append(b, '}')
	}
	if st := s.Status(); st.Code == codes.Error {
		msg := st.Description
		if msg == "" {
			msg = "error"
		}
		b = append(b, `,"error":`...)
		b = jsonw.AppendString(b, msg)
	}
	if v, ok := s.Resource().Set().Value("service.name"); ok && v.AsString() != "" {
		b = append(b, `,"service":`...)
		b = jsonw.AppendString(b, v.AsString())
	}
	return append(b, '}', '\n')
}

func (e *jsonlExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.w.Flush()
}

// Bounds of reading a JSON-lines file. The exporter appends to it for as long
// as the host runs, so it can be larger than what `wasmstream trace` should
// hold: the newest spans are kept (the last lines) and the older ones only
// counted.
const (
	MaxLineBytes = 4 << 20   // a longer line is an error naming it
	MaxReadSpans = 200_000   // spans kept
	MaxReadBytes = 256 << 20 // bytes of lines kept
)

// ReadJSONL reads the spans of a JSON-lines file: the newest MaxReadSpans (or
// MaxReadBytes) of them. A malformed or over-long line is an error naming it.
func ReadJSONL(r io.Reader) ([]Span, error) {
	spans, _, err := ReadJSONLTail(r, MaxReadSpans, MaxReadBytes)
	return spans, err
}

// ReadJSONLTail reads the spans of a JSON-lines file, keeping the last
// maxSpans of them within maxBytes of lines; skipped is how many earlier
// spans it read and left out.
func ReadJSONLTail(r io.Reader, maxSpans, maxBytes int) (spans []Span, skipped int, err error) {
	var sizes []int
	head, kept := 0, 0 // spans[head:] are kept; kept is their line bytes
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var s Span
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, 0, fmt.Errorf("line %d: %w", n, err)
		}
		spans, sizes = append(spans, s), append(sizes, len(line))
		kept += len(line)
		for len(spans)-head > maxSpans || (kept > maxBytes && len(spans)-head > 1) {
			kept -= sizes[head]
			spans[head] = Span{}
			head++
			skipped++
		}
		if head > 1024 && head > len(spans)/2 {
			spans, sizes = append(spans[:0:0], spans[head:]...), append(sizes[:0:0], sizes[head:]...)
			head = 0
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, 0, fmt.Errorf("line %d: longer than %d bytes: not a span this host wrote", n+1, MaxLineBytes)
		}
		return nil, 0, err
	}
	return spans[head:], skipped, nil
}

// NewWriter returns a tracer that writes the spans of every attempt it is
// told to keep as JSON lines to w (as the jsonl exporter does), for a
// command that renders them itself (`wasmstream test`). w is written from
// the tracer's goroutine until Shutdown returns.
func NewWriter(w io.Writer, cfg Config) *Tracer {
	return newTracer(NewJSONLExporter(w), cfg, func() error { return nil })
}
