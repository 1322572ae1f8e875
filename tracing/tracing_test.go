package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestNilTracerAndAttemptDoNothing(t *testing.T) {
	var tr *Tracer
	a := tr.Begin(Info{}, HeaderFunc(func(string) []byte { return nil }))
	a.Call("x", time.Now(), 0, nil)
	a.Op("http", "GET x", time.Now(), 0, "ok")
	if a.Decide(true) {
		t.Fatal("a nil attempt was kept")
	}
	tp, ts, done := a.Produce(ProduceOutput, "t")
	done(0, 0, nil)
	a.End("ok", "", "")
	if tp != nil || ts != nil || a.TraceID() != "" || tr.Shutdown(context.Background()) != nil {
		t.Fatal("nil tracing produced something")
	}
}

func TestSampledRatio(t *testing.T) {
	kept := 0
	for i := 0; i < 20000; i++ {
		if sampled(0.1, trace.SpanContext{}) {
			kept++
		}
	}
	if kept < 1600 || kept > 2400 {
		t.Fatalf("ratio 0.1 kept %d of 20000", kept)
	}
	if sampled(0, trace.SpanContext{}) || !sampled(1, trace.SpanContext{}) {
		t.Fatal("ratio bounds")
	}
}

// An attempt's spans are written only once it is decided, with the timings
// noted before; they round-trip through the JSON-lines file and render as a
// tree.
func TestJSONLRoundTripAndRender(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s.jsonl")
	tr, err := New(context.Background(), Config{Exporter: ExporterJSONL, File: file, SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	info := Info{Pipeline: "p", Topic: "in", Partition: 1, Offset: 7, Key: []byte("k"), OriginTopic: "in", OriginPartition: 1, OriginOffset: 7, Attempt: 1}
	healthy := tr.Begin(info, HeaderFunc(func(string) []byte { return nil }))
	healthy.Call("wasmstream_on_record", time.Now(), time.Millisecond, nil)
	if healthy.Decide(false) {
		t.Fatal("a healthy record was kept at ratio 0")
	}
	a := tr.Begin(info, HeaderFunc(func(string) []byte { return nil }))
	start := time.Now()
	a.Call("wasmstream_on_record", start, time.Millisecond, nil)
	a.Op("http", "GET http://svc/k", start.Add(time.Millisecond), 5*time.Millisecond, "http: timed out")
	time.Sleep(7 * time.Millisecond) // the noted timings are in the past when the attempt is decided
	if !a.Decide(true) {
		t.Fatal("a failed attempt was not kept")
	}
	tp, _, done := a.Produce(ProduceRetry, "p.retry.1s")
	done(0, 3, nil)
	a.End(ProduceRetry, "guest.retry", "lookup failed")
	info.Attempt, info.Topic, info.Offset = 2, "p.retry.1s", 3
	b := tr.Begin(info, HeaderFunc(func(k string) []byte {
		if k == HeaderTraceparent {
			return tp
		}
		return nil
	}))
	b.Decide(false)
	_, _, done = b.Produce(ProduceOutput, "out")
	done(0, 9, nil)
	b.End("ok", "", "")
	if a.TraceID() != b.TraceID() || a.TraceID() == "" {
		t.Fatalf("attempts in traces %s and %s", a.TraceID(), b.TraceID())
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(file)
	defer f.Close()
	spans, err := ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 6 {
		t.Fatalf("%d spans, want 6 (two attempts, a guest call, an operation, two produces)", len(spans))
	}
	var buf bytes.Buffer
	Render(&buf, Trace(spans, a.TraceID()))
	got := buf.String()
	for _, want := range []string{
		"· pipeline p · record in[1]@7 · key \"k\" · 2 attempt(s) · outcome ok",
		"process in[1]@7 · attempt 1 · retry",
		"├─ wasm wasmstream_on_record",
		"├─ http GET http://svc/k",
		"├─ wasm wasmstream_on_record",
		"✗ http: timed out",
		"└─ send p.retry.1s (retry) → [0]@3",
		"   └─ process p.retry.1s[1]@3 · attempt 2 · ok",
		"      └─ send out → [0]@9",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("render lacks %q:\n%s", want, got)
		}
	}
	if s := Summarize(spans, true); len(s) != 1 || s[0].Attempts != 2 {
		t.Fatalf("retried summary %+v", s)
	}
}

// The exporter's hand-written JSON reads back as the Span encoding/json
// would have written.
func TestSpanJSONMatchesEncodingJSON(t *testing.T) {
	tricky := []string{"", "plain", `q"uo\te`, "\n\r\t\b\f\x00\x1f<>&", "\xff\xfe", "é€😀", "\u2028\u2029", "a\xc3"}
	res := resource.NewSchemaless(attribute.String("service.name", "svc \"x\""))
	for i, s := range tricky {
		stub := tracetest.SpanStub{
			Name:        "process " + s,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, byte(i)}, SpanID: trace.SpanID{3, byte(i)}}),
			Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, byte(i)}, SpanID: trace.SpanID{4, byte(i)}}),
			SpanKind:    trace.SpanKindProducer,
			StartTime:   time.Date(2026, 12, 1, 3, 4, 5, 600+i, time.UTC),
			EndTime:     time.Date(2026, 12, 1, 3, 4, 6, 0, time.FixedZone("x", 3600)),
			Attributes:  []attribute.KeyValue{attribute.String("k"+s, s), attribute.Int64("n", int64(i)), attribute.Bool("b", true)},
			Status:      sdktrace.Status{Code: codes.Error, Description: s},
			Resource:    res,
		}
		ro := stub.Snapshot()
		want := Span{TraceID: ro.SpanContext().TraceID().String(), SpanID: ro.SpanContext().SpanID().String(), ParentID: ro.Parent().SpanID().String(),
			Name: ro.Name(), Kind: ro.SpanKind().String(), Start: ro.StartTime().UTC(), End: ro.EndTime().UTC(),
			Attrs: map[string]string{"k" + s: s, "n": fmt.Sprint(i), "b": "true"}, Error: s, Service: "svc \"x\""}
		if s == "" {
			want.Error = "error"
		}
		wantJSON, _ := json.Marshal(want)
		line := appendSpanJSON(nil, ro)
		var got, wantBack Span
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%q: %v\n%s", s, err, line)
		}
		json.Unmarshal(wantJSON, &wantBack)
		if !reflect.DeepEqual(got, wantBack) {
			t.Fatalf("%q:\n got %+v\nwant %+v\n%s", s, got, wantBack, line)
		}
	}
}

// tracedRecords traces n healthy records (3 spans each) as fast as it can.
func tracedRecords(tr *Tracer, n int) {
	for i := 0; i < n; i++ {
		a := tr.Begin(Info{Pipeline: "p", Topic: "in", Offset: int64(i), Attempt: 1}, HeaderFunc(func(string) []byte { return nil }))
		a.Call("wasmstream_on_record", time.Now(), time.Microsecond, nil)
		a.Decide(false)
		_, _, done := a.Produce(ProduceOutput, "out")
		done(0, int64(i), nil)
		a.End("ok", "", "")
	}
}

// Every span of every traced record is exported, however fast records end
// and however slow the exporter: the SDK's default batcher dropped spans
// once its queue of 2,048 was full (only 77–88% of records had their whole
// trace at 100%).
func TestNoSpanDroppedUnderLoad(t *testing.T) {
	exp := &slowExporter{}
	tr := newTracer(exp, Config{SampleRatio: 1}, func() error { return nil })
	const n = 20000
	tracedRecords(tr, n)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.spans.Load(); got != 3*n || tr.SpansLost() != 0 {
		t.Fatalf("%d spans exported, want %d; %d counted lost", got, 3*n, tr.SpansLost())
	}
}

// slowExporter takes 2 ms per batch, like a collector across a network.
type slowExporter struct{ spans atomic.Int64 }

func (e *slowExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	time.Sleep(2 * time.Millisecond)
	e.spans.Add(int64(len(spans)))
	return nil
}
func (e *slowExporter) Shutdown(context.Context) error { return nil }

type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return fmt.Errorf("collector unreachable")
}
func (failingExporter) Shutdown(context.Context) error { return nil }

// Spans an exporter fails to deliver are counted.
func TestSpansLostCounted(t *testing.T) {
	tr := newTracer(failingExporter{}, Config{SampleRatio: 1}, func() error { return nil })
	tracedRecords(tr, 100)
	tr.Shutdown(context.Background())
	if got := tr.SpansLost(); got != 300 {
		t.Fatalf("SpansLost = %d, want 300", got)
	}
}

// The JSON lines the exporter encodes from a span's facts are byte for
// byte those it writes for the span's SDK snapshot (what the OTLP
// exporters are given): one list of attributes, two encodings.
func TestFastJSONMatchesSnapshot(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled})
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{6, 7}})
	start := time.Date(2026, 12, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	info := &Info{Pipeline: "p\"q", Group: "g", Module: "m", ModuleDigest: "sha256:00", Topic: "in<1>", Partition: 3, Offset: 1 << 40,
		Key: []byte("k"), OriginTopic: "in", OriginPartition: 2, OriginOffset: 9, Attempt: 2, Instance: 17}
	res := resource.NewSchemaless(attribute.String("service.name", "svc \"x\""))
	scope := instrumentation.Scope{Name: "s"}
	for i, s := range []span{
		{what: spanAttempt, prefix: "process ", subject: info.Topic, info: info, key: "k\n", outcome: "ok"},
		{what: spanAttempt, prefix: "process ", subject: info.Topic, info: info, noKey: true, outcome: "retry",
			errKind: "guest.trap", errMsg: "unreachable\x00é", failed: true, status: "guest.trap: unreachable"},
		{what: spanCall, prefix: "wasm ", subject: "wasmstream_on_record"},
		{what: spanCall, prefix: "wasm ", subject: "wasmstream_on_record", failed: true},
		{what: spanOp, prefix: "http ", subject: "GET http://svc/k?a=1&b=2", asyncOp: "http", opResult: "ok", method: "GET", url: "http://svc/k?a=1&b=2"},
		{what: spanOp, prefix: "timer ", subject: "10ms", asyncOp: "timer", opResult: "deadline", failed: true, status: "deadline"},
		{what: spanProduce, prefix: "send ", subject: "out\u2028", topic: "out\u2028", kind: ProduceDeadLetter, partition: 5, offset: 77},
	} {
		s.sc, s.parent, s.start, s.end = sc, parent, start, start.Add(time.Duration(i)*time.Millisecond)
		if i == 2 {
			s.parent = trace.SpanContext{}
		}
		e := &jsonlExporter{}
		got := e.appendSpan(nil, &s, "svc \"x\"")
		want := appendSpanJSON(nil, s.readOnly(res, scope))
		if !bytes.Equal(got, want) {
			t.Errorf("span %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// Times are written as encoding/json writes a UTC time.Time, whatever the
// second and the nanoseconds.
func TestAppendTime(t *testing.T) {
	e := &jsonlExporter{}
	base := time.Date(2026, 12, 31, 23, 59, 58, 0, time.FixedZone("x", -7200))
	for _, d := range []time.Duration{0, 1, 10, 120, 999_999_999, 1_000_000_000, 1_500_000_000, 1_000_000_001, 86400e9 + 7} {
		for range 2 { // the second cached, and not
			tm := base.Add(d)
			want, _ := json.Marshal(tm.UTC())
			got := append([]byte{'"'}, e.appendTime(nil, tm)...)
			if got = append(got, '"'); !bytes.Equal(got, want) {
				t.Fatalf("%v: got %s, want %s", tm, got, want)
			}
		}
	}
}

// An attempt not begun is decided by Decide's rule (Keep): a healthy one
// not sampled allocates nothing; one kept (BeginKept) writes the same spans
// as an attempt begun before it ran and decided the same way, from the
// start it is given.
func TestKeepAndBeginKept(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s.jsonl")
	tr, err := New(context.Background(), Config{Exporter: ExporterJSONL, File: file, SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	none := HeaderFunc(func(string) []byte { return nil })
	if n := testing.AllocsPerRun(100, func() {
		if _, keep := tr.Keep(false, 1, none); keep {
			t.Fatal("a healthy first attempt was kept at ratio 0")
		}
	}); n != 0 {
		t.Fatalf("deciding an attempt not begun: %.1f allocations, want 0", n)
	}
	for _, c := range []struct {
		failed  bool
		attempt int
		hs      Headers
	}{{true, 1, none}, {false, 2, none}, {false, 1, HeaderFunc(func(k string) []byte {
		if k == HeaderTraceparent {
			return []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		}
		return nil
	})}} {
		if _, keep := tr.Keep(c.failed, c.attempt, c.hs); !keep {
			t.Fatalf("failed %v, attempt %d: not kept", c.failed, c.attempt)
		}
	}
	info := Info{Pipeline: "p", Topic: "in", Partition: 1, Offset: 7, Key: []byte("k"), OriginTopic: "in", OriginPartition: 1, OriginOffset: 7, Attempt: 1, Instance: 9}
	p, _ := tr.Keep(true, 1, none)
	start := time.Now().Add(-time.Millisecond)
	a := tr.BeginKept(info, p, start)
	a.Call("wasmstream_on_record", start, 500*time.Microsecond, nil)
	if !a.Decide(true) {
		t.Fatal("an attempt begun kept was decided not kept")
	}
	a.End("dead_letter", "guest_fail", "no")
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spans, err := ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the attempt and its call", len(spans))
	}
	att, call := spans[1], spans[0]
	if att.Kind != "consumer" || call.ParentID != att.SpanID || !att.Start.Equal(start) || !call.Start.Equal(start) ||
		call.End.Sub(call.Start) != 500*time.Microsecond || att.Attrs["wasmstream.instance.id"] != "9" || att.Error == "" {
		t.Fatalf("attempt %+v, call %+v", att, call)
	}
}

// The next inline attempt continues the trace of the one before, which
// ended (retry_inline) before it was begun: its span is the parent.
func TestNextContinuesEndedAttempt(t *testing.T) {
	tr, err := New(context.Background(), Config{Exporter: ExporterJSONL, File: filepath.Join(t.TempDir(), "s.jsonl"), SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	a := tr.Begin(Info{Topic: "in", Attempt: 1}, HeaderFunc(func(string) []byte { return nil }))
	a.Decide(true)
	a.End("retry_inline", "guest_retry", "again")
	n := a.Next(Info{Topic: "in", Attempt: 2})
	if !n.parent.Equal(a.sc) || !n.Decide(false) || n.TraceID() != a.TraceID() {
		t.Fatalf("next attempt's parent %v, want the ended attempt's span %v", n.parent, a.sc)
	}
}
