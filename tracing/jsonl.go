package tracing

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	mu  sync.Mutex
	w   *bufio.Writer
	buf []byte
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
	}
	if cap(e.buf) > 1<<20 {
		e.buf = nil // one huge span does not pin its buffer
	}
	return e.w.Flush()
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
