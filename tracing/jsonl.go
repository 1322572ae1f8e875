package tracing

import (
	"bufio"
	"context"
	"encoding/json"
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

// ReadJSONL reads the spans of a JSON-lines file; a malformed line is an
// error naming it.
func ReadJSONL(r io.Reader) ([]Span, error) {
	var out []Span
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var s Span
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}
