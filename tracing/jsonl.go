package tracing

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

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

// jsonlExporter writes spans as JSON lines.
type jsonlExporter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
}

// NewJSONLExporter returns an exporter writing one JSON object per span to w.
func NewJSONLExporter(w io.Writer) sdktrace.SpanExporter {
	bw := bufio.NewWriter(w)
	return &jsonlExporter{w: bw, enc: json.NewEncoder(bw)}
}

func (e *jsonlExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		out := Span{
			TraceID: s.SpanContext().TraceID().String(),
			SpanID:  s.SpanContext().SpanID().String(),
			Name:    s.Name(),
			Kind:    s.SpanKind().String(),
			Start:   s.StartTime().UTC(),
			End:     s.EndTime().UTC(),
		}
		if p := s.Parent(); p.IsValid() {
			out.ParentID = p.SpanID().String()
		}
		if attrs := s.Attributes(); len(attrs) > 0 {
			out.Attrs = make(map[string]string, len(attrs))
			for _, kv := range attrs {
				out.Attrs[string(kv.Key)] = kv.Value.Emit()
			}
		}
		if st := s.Status(); st.Code == codes.Error {
			out.Error = st.Description
			if out.Error == "" {
				out.Error = "error"
			}
		}
		if v, ok := s.Resource().Set().Value("service.name"); ok {
			out.Service = v.AsString()
		}
		if err := e.enc.Encode(&out); err != nil {
			return err
		}
	}
	return e.w.Flush()
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
