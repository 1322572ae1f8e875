// Package tracing traces every record's path through wasmstream with
// OpenTelemetry: one consumer span per attempt, child spans for each guest
// call and asynchronous operation, and producer spans for outputs and for
// retry and dead-letter produces. W3C trace context travels in Kafka record
// headers, so an input's trace continues through wasmstream, a retried
// record's next attempt continues the same trace, and outputs carry it on.
//
// Sampling is decided per record, once its fate is known (RATIONALE.md,
// "Tracing"): while an attempt runs it only notes timestamps; when it ends,
// a failed attempt (and every later attempt of a record that failed) is
// always materialised as spans, a healthy one only if its upstream trace is
// sampled or it wins the configured ratio. A nil *Tracer and a nil *Attempt
// are valid and do nothing: with tracing off the hot path pays a nil check.
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Exporters.
const (
	ExporterNone     = "none"
	ExporterJSONL    = "jsonl"     // one JSON object per span, appended to a file
	ExporterStdout   = "stdout"    // the same lines on standard output
	ExporterOTLPGRPC = "otlp-grpc" // an OpenTelemetry collector, Jaeger, Tempo...
	ExporterOTLPHTTP = "otlp-http"
)

// Config configures tracing.
type Config struct {
	Exporter    string
	Endpoint    string            // otlp: host:port
	Insecure    bool              // otlp: plain text instead of TLS
	Headers     map[string]string // otlp: request headers (authentication)
	File        string            // jsonl: the file spans are appended to
	SampleRatio float64           // share of healthy records traced, 0..1
	ServiceName string
	Version     string // the service version resource attribute
}

// Tracer creates attempts. Safe for concurrent use.
type Tracer struct {
	tp    *sdktrace.TracerProvider
	tr    trace.Tracer
	ratio float64
	close func() error
	exp   *countingExporter
}

// New returns a tracer exporting as cfg says, or nil when the exporter is
// none.
func New(ctx context.Context, cfg Config) (*Tracer, error) {
	var exp sdktrace.SpanExporter
	closeFn := func() error { return nil }
	switch cfg.Exporter {
	case "", ExporterNone:
		return nil, nil
	case ExporterJSONL:
		f, err := os.OpenFile(cfg.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("tracing.file: %w", err)
		}
		exp, closeFn = NewJSONLExporter(f), f.Close
	case ExporterStdout:
		exp = NewJSONLExporter(os.Stdout)
	case ExporterOTLPGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithHeaders(cfg.Headers)}
		if cfg.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		e, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp-grpc exporter: %w", err)
		}
		exp = e
	case ExporterOTLPHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(cfg.Endpoint), otlptracehttp.WithHeaders(cfg.Headers)}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		e, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp-http exporter: %w", err)
		}
		exp = e
	default:
		return nil, fmt.Errorf("tracing.exporter: %q: want none, jsonl, stdout, otlp-grpc or otlp-http", cfg.Exporter)
	}
	return newTracer(exp, cfg, closeFn), nil
}

// newTracer is a tracer exporting to exp.
func newTracer(exp sdktrace.SpanExporter, cfg Config, closeFn func() error) *Tracer {
	name := cfg.ServiceName
	if name == "" {
		name = "wasmstream"
	}
	res := resource.NewSchemaless(attribute.String("service.name", name), attribute.String("service.version", cfg.Version))
	ce := &countingExporter{SpanExporter: exp}
	tp := sdktrace.NewTracerProvider(
		// Every span that is created is kept: the decision was made per
		// record before its spans were created.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		// A record that is traced is traced in full: when the queue is
		// full, ending a span waits for room instead of dropping it (the
		// SDK's default), so a slow exporter slows the records it traces.
		// Spans an exporter fails to deliver are counted (SpansLost).
		sdktrace.WithBatcher(ce, sdktrace.WithBatchTimeout(time.Second), sdktrace.WithBlocking(),
			sdktrace.WithMaxQueueSize(queueSpans), sdktrace.WithMaxExportBatchSize(batchSpans)),
		sdktrace.WithResource(res),
	)
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/wasmstream/wasmstream"), ratio: cfg.SampleRatio, close: closeFn, exp: ce}
}

// The batcher's queue and batch, in spans: three to five spans a record,
// so the queue holds a few thousand records' spans (a few MiB) while a
// batch is written.
const (
	queueSpans = 16384
	batchSpans = 2048
)

// SpansLost is how many spans the exporter failed to deliver (a collector
// down or refusing), exported as the metric wasmstream.trace.spans.lost.
func (t *Tracer) SpansLost() int64 {
	if t == nil {
		return 0
	}
	return t.exp.lost.Load()
}

// countingExporter counts the spans of failed exports.
type countingExporter struct {
	sdktrace.SpanExporter
	lost atomic.Int64
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.lost.Add(int64(len(spans)))
	}
	return err
}

// Shutdown exports what is buffered and stops.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	err := t.tp.Shutdown(ctx)
	if cerr := t.close(); err == nil {
		err = cerr
	}
	return err
}

// Header names of W3C trace context.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

var propagator = propagation.TraceContext{}

// Info describes an attempt.
type Info struct {
	Pipeline     string
	Group        string
	Module       string // module name (the pipeline's module path base)
	ModuleDigest string
	Topic        string // where this attempt's record was consumed
	Partition    int32
	Offset       int64
	Key          []byte
	// Origin is where the record was first consumed (differs on retry topics).
	OriginTopic     string
	OriginPartition int32
	OriginOffset    int64
	Attempt         int
	Instance        uint64
}

// Attempt is one attempt of one record. Its methods may be called from any
// goroutine; a nil *Attempt does nothing.
type Attempt struct {
	t      *Tracer
	info   Info
	start  time.Time
	parent trace.SpanContext

	mu      sync.Mutex
	events  []event // guest calls and operations, until decided
	decided bool
	kept    bool
	ctx     context.Context
	span    trace.Span
}

type event struct {
	name  string
	kind  string // "wasm" or the operation kind
	start time.Time
	dur   time.Duration
	err   string
	attrs []attribute.KeyValue
}

// Begin starts an attempt of a record whose headers header looks up.
func (t *Tracer) Begin(info Info, header func(string) []byte) *Attempt {
	if t == nil {
		return nil
	}
	a := &Attempt{t: t, info: info, start: time.Now()}
	if tp := header(HeaderTraceparent); tp != nil {
		c := propagation.MapCarrier{HeaderTraceparent: string(tp)}
		if ts := header(HeaderTracestate); ts != nil {
			c[HeaderTracestate] = string(ts)
		}
		a.parent = trace.SpanContextFromContext(propagator.Extract(context.Background(), c))
	}
	return a
}

// Next starts the next inline attempt of the same record: a child of a, so
// that the trace reads attempt 1 → attempt 2. a must be decided (failed).
func (a *Attempt) Next(info Info) *Attempt {
	if a == nil {
		return nil
	}
	n := &Attempt{t: a.t, info: info, start: time.Now(), parent: a.parent}
	a.mu.Lock()
	if a.span != nil {
		n.parent = a.span.SpanContext()
	}
	a.mu.Unlock()
	return n
}

// SetInstance records the instance the attempt runs on.
func (a *Attempt) SetInstance(id uint64) {
	if a != nil {
		a.mu.Lock()
		a.info.Instance = id
		a.mu.Unlock()
	}
}

// Call notes a call into the guest.
func (a *Attempt) Call(export string, start time.Time, d time.Duration, err error) {
	if a == nil {
		return
	}
	e := event{name: "wasm " + export, kind: "wasm", start: start, dur: d}
	if err != nil {
		e.err = err.Error()
	}
	a.add(e)
}

// Op notes an asynchronous operation: its kind ("http", "timer"), what it
// was ("GET http://…"), and how it ended ("ok", or the error).
func (a *Attempt) Op(kind, desc string, start time.Time, d time.Duration, outcome string) {
	if a == nil {
		return
	}
	e := event{name: kind + " " + desc, kind: kind, start: start, dur: d,
		attrs: []attribute.KeyValue{attribute.String("wasmstream.async.kind", kind), attribute.String("wasmstream.async.outcome", outcome)}}
	if outcome != "ok" {
		e.err = outcome
	}
	if kind == "http" {
		if m, u, ok := strings.Cut(desc, " "); ok {
			e.attrs = append(e.attrs, attribute.String("http.request.method", m), attribute.String("url.full", u))
		}
	}
	a.add(e)
}

func (a *Attempt) add(e event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.decided {
		if a.kept {
			a.emit(e)
		}
		return
	}
	a.events = append(a.events, e)
}

// Decide settles whether the attempt is traced: always when it failed or
// the record failed before (attempt > 1); otherwise when its upstream trace
// is sampled or by the configured ratio. It materialises the attempt's spans
// when kept, and reports whether it was.
func (a *Attempt) Decide(failed bool) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.decided {
		return a.kept
	}
	a.decided = true
	a.kept = failed || a.info.Attempt > 1 || a.parent.IsSampled() || sampled(a.t.ratio, a.parent)
	if !a.kept {
		a.events = nil
		return false
	}
	ctx := context.Background()
	if a.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, a.parent)
	}
	i := &a.info
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs,
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", i.Topic),
		attribute.String("messaging.destination.partition.id", strconv.Itoa(int(i.Partition))),
		attribute.Int64("messaging.kafka.offset", i.Offset),
		attribute.String("messaging.consumer.group.name", i.Group),
		attribute.String("wasmstream.pipeline", i.Pipeline),
		attribute.String("wasmstream.module.name", i.Module),
		attribute.String("wasmstream.module.digest", i.ModuleDigest),
		attribute.Int64("wasmstream.instance.id", int64(i.Instance)),
		attribute.Int("wasmstream.attempt", i.Attempt),
		attribute.String("wasmstream.origin.topic", i.OriginTopic),
		attribute.Int("wasmstream.origin.partition", int(i.OriginPartition)),
		attribute.Int64("wasmstream.origin.offset", i.OriginOffset),
	)
	if i.Key != nil {
		attrs = append(attrs, attribute.String("messaging.kafka.message.key", keyString(i.Key)))
	}
	a.ctx, a.span = a.t.tr.Start(ctx, "process "+i.Topic, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(a.start), trace.WithAttributes(attrs...))
	for _, e := range a.events {
		a.emit(e)
	}
	a.events = nil
	return true
}

func (a *Attempt) emit(e event) {
	_, s := a.t.tr.Start(a.ctx, e.name, trace.WithTimestamp(e.start), trace.WithAttributes(e.attrs...))
	if e.err != "" {
		s.SetStatus(codes.Error, e.err)
	}
	s.End(trace.WithTimestamp(e.start.Add(e.dur)))
}

// Produce kinds.
const (
	ProduceOutput     = "output"
	ProduceRetry      = "retry"
	ProduceDeadLetter = "dead_letter"
)

// Produce starts the producer span of a record the attempt produces (an
// output, or the record itself to a retry or dead-letter topic) and returns
// the traceparent (and tracestate) to put in its headers, nil when the
// attempt is not traced. done ends the span when the broker answered.
func (a *Attempt) Produce(kind, topic string) (traceparent, tracestate []byte, done func(partition int32, offset int64, err error)) {
	if a == nil {
		return nil, nil, func(int32, int64, error) {}
	}
	a.mu.Lock()
	kept, ctx := a.kept, a.ctx
	a.mu.Unlock()
	if !kept {
		return nil, nil, func(int32, int64, error) {}
	}
	_, s := a.t.tr.Start(ctx, "send "+topic, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "send"),
		attribute.String("messaging.destination.name", topic),
		attribute.String("wasmstream.produce.kind", kind),
	))
	c := propagation.MapCarrier{}
	propagator.Inject(trace.ContextWithSpan(context.Background(), s), c)
	traceparent = []byte(c[HeaderTraceparent])
	if ts := c[HeaderTracestate]; ts != "" {
		tracestate = []byte(ts)
	}
	return traceparent, tracestate, func(partition int32, offset int64, err error) {
		s.SetAttributes(attribute.String("messaging.destination.partition.id", strconv.Itoa(int(partition))), attribute.Int64("messaging.kafka.offset", offset))
		if err != nil {
			s.SetStatus(codes.Error, err.Error())
		}
		s.End()
	}
}

// End ends the attempt with its outcome ("ok", "retry", "dead_letter",
// "retry_inline", "abandoned") and, for failures, the error kind and message.
func (a *Attempt) End(outcome, errKind, errMsg string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.kept || a.span == nil {
		return
	}
	a.span.SetAttributes(attribute.String("wasmstream.outcome", outcome))
	if errKind != "" {
		a.span.SetAttributes(attribute.String("error.type", errKind), attribute.String("wasmstream.error", truncate(errMsg, 1024)))
		a.span.SetStatus(codes.Error, errKind+": "+truncate(errMsg, 256))
	}
	a.span.End()
	a.span = nil
}

// TraceID is the attempt's trace id ("" when not traced).
func (a *Attempt) TraceID() string {
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx == nil {
		return ""
	}
	return trace.SpanContextFromContext(a.ctx).TraceID().String()
}

// sampled decides a healthy record by the ratio: on its trace id when it
// continues one (so every service sampling by ratio agrees), at random
// otherwise.
func sampled(ratio float64, parent trace.SpanContext) bool {
	switch {
	case ratio >= 1:
		return true
	case ratio <= 0:
		return false
	}
	var x uint64
	if parent.IsValid() {
		id := parent.TraceID()
		x = binary.BigEndian.Uint64(id[8:16]) >> 1
	} else {
		var b [8]byte
		rand.Read(b[:])
		x = binary.BigEndian.Uint64(b[:]) >> 1
	}
	return x < uint64(ratio*(1<<63))
}

func keyString(k []byte) string {
	if utf8.Valid(k) {
		return truncate(string(k), 256)
	}
	return fmt.Sprintf("%x", k[:min(len(k), 128)])
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
