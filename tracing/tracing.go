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
// sampled or it wins the configured ratio. An attempt whose caller knows
// what it ran (a record processed in one call) is decided before it is
// begun (Tracer.Keep) and begun only when kept (Tracer.BeginKept): one not
// kept allocates nothing. A nil *Tracer and a nil *Attempt are valid and do
// nothing: with tracing off the hot path pays a nil check.
package tracing

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
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
	// jsonl: File is rotated when it reaches MaxFileBytes (<= 0: never),
	// and MaxFiles rotated parts are kept (rotate.go).
	MaxFileBytes int64
	MaxFiles     int
	ServiceName  string
	Version      string // the service version resource attribute
}

// Tracer creates attempts. Safe for concurrent use.
type Tracer struct {
	b     *batcher
	ratio float64
	close func() error
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
		f, err := openRotating(cfg.File, cfg.MaxFileBytes, cfg.MaxFiles)
		if err != nil {
			return nil, fmt.Errorf("tracing.file: %w", err)
		}
		e := &jsonlExporter{w: bufio.NewWriterSize(f, 64<<10), file: f}
		exp, closeFn = e, f.Close
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
	b := newBatcher(exp, res, name, instrumentation.Scope{Name: "github.com/wasmstream/wasmstream"})
	go b.run()
	return &Tracer{b: b, ratio: cfg.SampleRatio, close: closeFn}
}

// Spans are built by wasmstream itself, not by the OpenTelemetry SDK's
// tracer: an attempt knows every span's times and attributes when it
// writes it, so it fills a finished span (a span value, span.go) in one
// step and hands it to the batcher, whose goroutine encodes it for the
// exporter. The SDK's tracer cost three times as much per span (starting a
// recording span, copying and deduplicating its attributes, snapshotting
// it at End, its batch processor), and dropped spans when its queue was
// full.
//
// The batcher's batch and queue, in spans: three to five spans a record,
// so a batch is a few hundred records' spans, and the queue of full
// batches a few thousand records' (a few MiB) while a batch is written.
// Spans are appended to the open batch under a mutex, and the batcher's
// goroutine is woken once per full batch (or by its timer), not once per
// span as a channel of spans did. A record that is traced is traced in
// full: when the queue is full, ending a span waits for room, so a slow
// exporter slows the records it traces instead of losing their spans.
const (
	batchSpans    = 2048
	queueBatches  = 8
	batchTimeout  = time.Second
	exportTimeout = 30 * time.Second
)

// batcher collects finished spans in batches and exports them from its own
// goroutine, which Shutdown waits for.
//
// Lock order: sending (read) before mu.
type batcher struct {
	exp   sdktrace.SpanExporter
	lines *jsonlExporter // exp when it writes JSON lines: spans are encoded without the SDK's snapshot
	res   *resource.Resource
	svc   string // service.name in res
	scope instrumentation.Scope
	full  chan []span // full batches, to the goroutine; closed by Shutdown
	free  chan []span // exported batches, for reuse
	done  chan struct{}
	lost  atomic.Int64

	sending sync.RWMutex // held for reading while sending on full; Shutdown closes full under it
	mu      sync.Mutex   // guards open and closed
	open    []span       // the batch being filled
	closed  bool
}

func newBatcher(exp sdktrace.SpanExporter, res *resource.Resource, svc string, scope instrumentation.Scope) *batcher {
	b := &batcher{exp: exp, res: res, svc: svc, scope: scope,
		full: make(chan []span, queueBatches), free: make(chan []span, queueBatches+2), done: make(chan struct{})}
	b.lines, _ = exp.(*jsonlExporter)
	b.open = make([]span, 0, batchSpans)
	return b
}

func (b *batcher) send(s *span) {
	b.sending.RLock()
	defer b.sending.RUnlock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.lost.Add(1) // ended after shutdown
		return
	}
	b.open = append(b.open, *s)
	if len(b.open) < batchSpans {
		b.mu.Unlock()
		return
	}
	full := b.open
	b.open = b.buffer()
	b.mu.Unlock()
	b.full <- full
}

// buffer is an empty batch, reused when one is free.
func (b *batcher) buffer() []span {
	select {
	case buf := <-b.free:
		return buf
	default:
		return make([]span, 0, batchSpans)
	}
}

// take takes the open batch, if it has spans (the timer's partial batch).
func (b *batcher) take() []span {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.open) == 0 {
		return nil
	}
	batch := b.open
	b.open = b.buffer()
	return batch
}

func (b *batcher) run() {
	defer close(b.done)
	var ro []sdktrace.ReadOnlySpan
	export := func(batch []span) {
		var err error
		if b.lines != nil {
			err = b.lines.writeSpans(batch, b.svc)
		} else {
			ro = ro[:0]
			for i := range batch {
				ro = append(ro, batch[i].readOnly(b.res, b.scope))
			}
			ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
			err = b.exp.ExportSpans(ctx, ro)
			cancel()
			clear(ro)
		}
		if err != nil {
			b.lost.Add(int64(len(batch)))
			otel.Handle(err)
		}
		clear(batch)
		select {
		case b.free <- batch[:0]:
		default:
		}
	}
	tick := time.NewTicker(batchTimeout)
	defer tick.Stop()
	for {
		select {
		case batch, ok := <-b.full:
			if !ok {
				return
			}
			export(batch)
		case <-tick.C:
			if batch := b.take(); batch != nil {
				export(batch)
			}
		}
	}
}

// SpansLost is how many spans the exporter failed to deliver (a collector
// down or refusing), exported as the metric wasmstream.trace.spans.lost.
func (t *Tracer) SpansLost() int64 {
	if t == nil {
		return 0
	}
	return t.b.lost.Load()
}

// Shutdown exports what is queued and stops.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	b := t.b
	b.sending.Lock() // senders waiting for room are let through first
	b.mu.Lock()
	was := b.closed
	last := b.open
	b.closed, b.open = true, nil
	b.mu.Unlock()
	if !was {
		if len(last) > 0 {
			b.full <- last // the goroutine runs (and takes mu only for its timer): room comes
		}
		close(b.full)
	}
	b.sending.Unlock()
	var err error
	select {
	case <-b.done:
	case <-ctx.Done():
		err = fmt.Errorf("tracing: spans still queued at shutdown: %w", ctx.Err())
	}
	if eerr := b.exp.Shutdown(ctx); err == nil {
		err = eerr
	}
	if cerr := t.close(); err == nil {
		err = cerr
	}
	return err
}

// export hands a finished span to the batcher.
func (t *Tracer) export(s *span) { t.b.send(s) }

// child is a new span context in sc's trace.
func child(sc trace.SpanContext) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: newSpanID(), TraceFlags: trace.FlagsSampled, TraceState: sc.TraceState()})
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], mrand.Uint64())
	}
	return id
}

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], mrand.Uint64())
		binary.BigEndian.PutUint64(id[8:], mrand.Uint64())
	}
	return id
}

// formatTraceparent is sc as a W3C traceparent header value.
func formatTraceparent(sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
}

// Header names of W3C trace context.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

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
	events  []event  // guest calls and operations, until decided
	first   [1]event // events' first storage
	decided bool
	kept    bool
	sc      trace.SpanContext // the attempt's span, once kept
	open    bool              // the attempt's span is not ended yet
	key     string            // the record's key as an attribute, once kept
}

// Headers looks up a record's header (the last of that key), nil if none.
type Headers interface{ Header(key string) []byte }

// HeaderFunc is a function as Headers.
type HeaderFunc func(key string) []byte

func (f HeaderFunc) Header(key string) []byte { return f(key) }

// Begin starts an attempt of a record whose headers hs looks up, to note
// its guest calls and operations as they come (an attempt that waits on
// asynchronous operations). An attempt whose outcome is known before
// anything else is noted is begun only if it is kept (Keep, BeginKept).
func (t *Tracer) Begin(info Info, hs Headers) *Attempt {
	if t == nil {
		return nil
	}
	a := &Attempt{t: t, info: info, start: time.Now(), parent: parentOf(hs)}
	a.events = a.first[:0] // the first noted call needs no allocation of its own
	return a
}

// Parent is the upstream trace of a record whose attempt was not begun:
// what Keep read of its headers, for BeginKept.
type Parent struct{ sc trace.SpanContext }

// Keep decides, by Decide's rule, whether an attempt that was not begun
// (nothing was noted while it ran but what its caller knows) is traced:
// attempt is its number, failed whether it failed, hs its record's headers.
// An attempt not kept allocates nothing. A nil *Tracer keeps nothing.
func (t *Tracer) Keep(failed bool, attempt int, hs Headers) (Parent, bool) {
	if t == nil {
		return Parent{}, false
	}
	p := parentOf(hs)
	return Parent{p}, keeps(t.ratio, failed, attempt, p)
}

// BeginKept begins an attempt that Keep kept, already decided: start is
// when it began (its first call's start), and what is noted on it becomes a
// span at once.
func (t *Tracer) BeginKept(info Info, p Parent, start time.Time) *Attempt {
	if t == nil {
		return nil
	}
	a := &Attempt{t: t, info: info, start: start, parent: p.sc, decided: true}
	a.keep()
	return a
}

// Next starts the next inline attempt of the same record: a child of a, so
// that the trace reads attempt 1 → attempt 2. a must be decided (failed).
func (a *Attempt) Next(info Info) *Attempt {
	if a == nil {
		return nil
	}
	n := &Attempt{t: a.t, info: info, start: time.Now(), parent: a.parent}
	n.events = n.first[:0]
	a.mu.Lock()
	if a.kept { // ended already (retry_inline): its span is still the parent
		n.parent = a.sc
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
	e := event{what: spanCall, prefix: "wasm ", subject: export, start: start, dur: d}
	if err != nil {
		e.failed, e.status = true, err.Error()
	}
	a.add(&e)
}

// Op notes an asynchronous operation: its kind ("http", "timer",
// "state_get", "state_scan"), what it
// was ("GET http://…"), and how it ended ("ok", or the error).
func (a *Attempt) Op(kind, desc string, start time.Time, d time.Duration, outcome string) {
	if a == nil {
		return
	}
	e := event{what: spanOp, prefix: kind + " ", subject: desc, start: start, dur: d, op: &opFacts{kind: kind, outcome: outcome}}
	if outcome != "ok" {
		e.failed, e.status = true, outcome
	}
	if kind == "http" {
		if m, u, ok := strings.Cut(desc, " "); ok {
			e.op.method, e.op.url = m, u
		}
	}
	a.add(&e)
}

// event is a guest call or an operation noted while the attempt runs: a
// span once the attempt is kept.
type event struct {
	what            spanWhat
	failed          bool
	prefix, subject string
	status          string
	start           time.Time
	dur             time.Duration
	op              *opFacts // operations only
}

type opFacts struct{ kind, outcome, method, url string }

func (a *Attempt) add(e *event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.start.Before(a.start) {
		a.start = e.start // the attempt's span covers every call and operation of it
	}
	if a.decided {
		if a.kept {
			a.emit(e)
		}
		return
	}
	a.events = append(a.events, *e)
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
	if !keeps(a.t.ratio, failed, a.info.Attempt, a.parent) {
		a.events = nil
		return false
	}
	a.keep()
	for i := range a.events {
		a.emit(&a.events[i])
	}
	a.events = nil
	return true
}

// keeps is Decide's rule: an attempt is traced when it failed or the
// record failed before (attempt > 1), when its upstream trace is sampled,
// or by the configured ratio.
func keeps(ratio float64, failed bool, attempt int, parent trace.SpanContext) bool {
	return failed || attempt > 1 || parent.IsSampled() || sampled(ratio, parent)
}

// keep makes a decided attempt kept: its span's context, opened.
func (a *Attempt) keep() {
	a.kept = true
	if a.info.Key != nil {
		a.key = keyString(a.info.Key)
	}
	if a.parent.IsValid() {
		a.sc = child(a.parent)
	} else {
		a.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: newTraceID(), SpanID: newSpanID(), TraceFlags: trace.FlagsSampled})
	}
	a.open = true
}

// emit writes e as a finished child span of the attempt's.
func (a *Attempt) emit(e *event) {
	s := span{what: e.what, sc: child(a.sc), parent: a.sc, prefix: e.prefix, subject: e.subject, start: e.start, end: e.start.Add(e.dur),
		failed: e.failed, status: e.status}
	if o := e.op; o != nil {
		s.asyncOp, s.opResult, s.method, s.url = o.kind, o.outcome, o.method, o.url
	}
	a.t.export(&s)
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
	kept, parent := a.kept, a.sc
	a.mu.Unlock()
	if !kept {
		return nil, nil, func(int32, int64, error) {}
	}
	sc := child(parent)
	traceparent = formatTraceparent(sc)
	if ts := sc.TraceState().String(); ts != "" {
		tracestate = []byte(ts)
	}
	start := time.Now()
	return traceparent, tracestate, func(partition int32, offset int64, err error) {
		s := span{what: spanProduce, prefix: "send ", subject: topic, sc: sc, parent: parent, start: start, end: time.Now(),
			topic: topic, kind: kind, partition: partition, offset: offset}
		if err != nil {
			s.failed, s.status = true, err.Error()
		}
		a.t.export(&s)
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
	if !a.kept || !a.open {
		return
	}
	a.open = false
	s := span{what: spanAttempt, prefix: "process ", subject: a.info.Topic, sc: a.sc, parent: a.parent, start: a.start, end: time.Now(),
		info: &a.info, key: a.key, noKey: a.info.Key == nil, outcome: outcome}
	if errKind != "" {
		s.errKind, s.errMsg = errKind, truncate(errMsg, 1024)
		s.failed, s.status = true, errKind+": "+truncate(errMsg, 256)
	}
	a.t.export(&s)
}

// TraceID is the attempt's trace id ("" when not traced).
func (a *Attempt) TraceID() string {
	if a == nil {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.sc.IsValid() {
		return ""
	}
	return a.sc.TraceID().String()
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
		x = mrand.Uint64() >> 1 // not crypto/rand: a draw per healthy record, which need not be secret
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
