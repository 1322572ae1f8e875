package tracing

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

func TestNilTracerAndAttemptDoNothing(t *testing.T) {
	var tr *Tracer
	a := tr.Begin(Info{}, func(string) []byte { return nil })
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
	healthy := tr.Begin(info, func(string) []byte { return nil })
	healthy.Call("wasmstream_on_record", time.Now(), time.Millisecond, nil)
	if healthy.Decide(false) {
		t.Fatal("a healthy record was kept at ratio 0")
	}
	a := tr.Begin(info, func(string) []byte { return nil })
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
	b := tr.Begin(info, func(k string) []byte {
		if k == HeaderTraceparent {
			return tp
		}
		return nil
	})
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
