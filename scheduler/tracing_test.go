package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
	"github.com/wasmstream/wasmstream/tracing"
)

// tracedRun runs enrich over recs with retries through topics and the
// JSON-lines exporter, until want outputs and dead letters arrived, and
// returns the spans written and the outputs.
// keys are more pipeline keys (YAML lines indented for the pipeline).
func tracedRun(t *testing.T, ratio string, recs []*kgo.Record, wantOut, wantDLQ int, keys ...string) ([]tracing.Span, []*kgo.Record) {
	t.Helper()
	return tracedRunOf(t, "enrich", ratio, recs, wantOut, wantDLQ, keys...)
}

// tracedRunOf is tracedRun with the example guest module.
func tracedRunOf(t *testing.T, module, ratio string, recs []*kgo.Record, wantOut, wantDLQ int, keys ...string) ([]tracing.Span, []*kgo.Record) {
	t.Helper()
	if !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "retry:") }) {
		keys = append([]string{"    retry: {max_attempts: 3, backoff: [100ms, 200ms]}"}, keys...)
	}
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq", "g.p.retry.100ms", "g.p.retry.200ms")
	cl := kafkatest.Client(t, brokers)
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "spans.jsonl")
	cfg := testConfigWith(t, brokers, "g", guestPath(t, module), "in", "out", "dlq",
		strings.Join(keys, "\n"),
		fmt.Sprintf("tracing: {exporter: jsonl, file: %q, sample_ratio: %s}", file, ratio))
	r := startRunner(t, cfg)
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "outputs", func(rs []*kgo.Record) bool { return len(rs) >= wantOut })
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	dlq.ReadUntil(t, time.Minute, "dead letters", func(rs []*kgo.Record) bool { return len(rs) >= wantDLQ })
	r.Stop(context.Background()) // flushes the exporter
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spans, err := tracing.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	return spans, out.Recs
}

func byName(spans []tracing.Span) map[string]*tracing.Span {
	m := map[string]*tracing.Span{}
	for i := range spans {
		m[spans[i].SpanID] = &spans[i]
	}
	return m
}

func traceIDOf(r *kgo.Record) string {
	tp := kafkatest.Header(r, tracing.HeaderTraceparent)
	parts := strings.Split(tp, "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

// A record that fails twice and then succeeds is ONE trace: attempt 1 →
// retry produce → attempt 2 → retry produce → attempt 3 → output; a poison
// record's trace ends at its dead-letter produce.
func TestTraceAcrossRetries(t *testing.T) { checkTraceAcrossRetries(t) }

// checkTraceAcrossRetries is TestTraceAcrossRetries with more pipeline keys
// (a share group's: TestShareTraceAcrossRetries).
func checkTraceAcrossRetries(t *testing.T, keys ...string) {
	recs := []*kgo.Record{
		{Topic: "in", Key: []byte("transient"), Value: []byte(`{"fault":"transient","until":3}`)},
		{Topic: "in", Key: []byte("poison"), Value: []byte(`{"fault":"retry"}`)},
		{Topic: "in", Key: []byte("healthy"), Value: []byte(`{"ok":1}`)},
	}
	spans, outs := tracedRun(t, "1", recs, 2, 1, keys...)
	var transientOut *kgo.Record
	for _, o := range outs {
		if string(o.Key) == "transient" {
			transientOut = o
		}
	}
	id := traceIDOf(transientOut)
	if id == "" {
		t.Fatalf("output has no traceparent: %v", transientOut.Headers)
	}
	tr := tracing.Trace(spans, id)
	ids := byName(tr)
	var consumers, retries, outputs []*tracing.Span
	for i := range tr {
		s := &tr[i]
		switch {
		case s.Kind == "consumer":
			consumers = append(consumers, s)
		case s.Attrs["wasmstream.produce.kind"] == "retry":
			retries = append(retries, s)
		case s.Attrs["wasmstream.produce.kind"] == "output":
			outputs = append(outputs, s)
		}
	}
	sort.Slice(consumers, func(i, j int) bool { return consumers[i].Start.Before(consumers[j].Start) })
	if len(consumers) != 3 || len(retries) != 2 || len(outputs) != 1 {
		t.Fatalf("trace has %d attempts, %d retry produces, %d outputs; want 3, 2, 1", len(consumers), len(retries), len(outputs))
	}
	for i, c := range consumers {
		if c.Attrs["wasmstream.attempt"] != fmt.Sprint(i+1) || c.Attrs["wasmstream.origin.topic"] != "in" || c.Attrs["messaging.system"] != "kafka" || c.Attrs["messaging.kafka.message.key"] != "transient" {
			t.Fatalf("attempt %d span: %v", i+1, c.Attrs)
		}
		if i > 0 {
			// Attempt i+1 is a child of the retry produce of attempt i.
			p := ids[c.ParentID]
			if p == nil || p.Attrs["wasmstream.produce.kind"] != "retry" || p.ParentID != consumers[i-1].SpanID {
				t.Fatalf("attempt %d is not a child of attempt %d's retry produce", i+1, i)
			}
		}
	}
	want := []string{"retry", "retry", "ok"}
	for i, c := range consumers {
		if c.Attrs["wasmstream.outcome"] != want[i] {
			t.Fatalf("attempt %d outcome %q, want %q", i+1, c.Attrs["wasmstream.outcome"], want[i])
		}
		if (i < 2) != (c.Error != "") {
			t.Fatalf("attempt %d error %q", i+1, c.Error)
		}
	}
	if outputs[0].ParentID != consumers[2].SpanID {
		t.Fatal("the output produce is not a child of the last attempt")
	}
	// One guest call span for each attempt, under it: the record's part of
	// a call that carried several records is named after the batch entry.
	wasm := 0
	for _, s := range tr {
		if s.Name != "wasm "+abi.ExportOnRecord && s.Name != "wasm "+abi.ExportOnBatch {
			continue
		}
		wasm++
		if !slices.ContainsFunc(consumers, func(c *tracing.Span) bool { return c.SpanID == s.ParentID }) {
			t.Fatalf("guest call span %q is not under an attempt of the record", s.Name)
		}
	}
	if wasm != 3 {
		t.Fatalf("%d guest call spans, want 3", wasm)
	}

	// The poison record: three attempts, the trace ends at the dead letter.
	ptr := tracing.Find(spans, tracing.Query{Key: "poison", Partition: -1, Offset: -1})
	if len(ptr) != 1 {
		t.Fatalf("poison record in %d traces", len(ptr))
	}
	sums := tracing.Summarize(tracing.Trace(spans, ptr[0]), false)
	if len(sums) != 1 || sums[0].Attempts != 3 || sums[0].Outcome != "dead_letter" {
		t.Fatalf("poison trace summary %+v", sums)
	}
	var last *tracing.Span
	for i, s := range tracing.Trace(spans, ptr[0]) {
		if last == nil || s.End.After(last.End) {
			last = &tracing.Trace(spans, ptr[0])[i]
		}
	}
	if last.Attrs["wasmstream.produce.kind"] != "dead_letter" && last.Attrs["wasmstream.outcome"] != "dead_letter" {
		t.Fatalf("poison trace ends with %s %v", last.Name, last.Attrs)
	}
}

// An input's traceparent is continued; outputs carry the trace on.
func TestTraceContinuesInputContext(t *testing.T) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	recs := []*kgo.Record{{Topic: "in", Key: []byte("k"), Value: []byte(`{"ok":1}`),
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-" + tid + "-00f067aa0ba902b7-01")}}}}
	spans, outs := tracedRun(t, "1", recs, 1, 0)
	if got := traceIDOf(outs[0]); got != tid {
		t.Fatalf("output trace id %q, want the input's %s", got, tid)
	}
	tr := tracing.Trace(spans, tid)
	if len(tr) < 3 {
		t.Fatalf("%d spans in the input's trace", len(tr))
	}
	for _, s := range tr {
		if s.Kind == "consumer" && s.ParentID != "00f067aa0ba902b7" {
			t.Fatalf("attempt's parent %s, want the input's span", s.ParentID)
		}
	}
	if n := strings.Count(fmt.Sprint(outs[0].Headers), "traceparent"); n != 1 {
		t.Fatalf("%d traceparent headers on the output", n)
	}
}

// With sample_ratio 0, healthy records leave no spans, and a record that
// fails is still traced in full.
func TestTraceSamplingKeepsFailures(t *testing.T) {
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint("h", i)), Value: []byte(`{"ok":1}`)})
	}
	recs = append(recs, &kgo.Record{Topic: "in", Key: []byte("transient"), Value: []byte(`{"fault":"transient","until":2}`)})
	spans, outs := tracedRun(t, "0", recs, 51, 0)
	for _, s := range spans {
		if k := s.Attrs["messaging.kafka.message.key"]; s.Kind == "consumer" && k != "transient" {
			t.Fatalf("healthy record %s traced at sample_ratio 0", k)
		}
	}
	ids := tracing.Find(spans, tracing.Query{Key: "transient", Partition: -1, Offset: -1})
	if len(ids) != 1 {
		t.Fatalf("failing record in %d traces", len(ids))
	}
	sums := tracing.Summarize(tracing.Trace(spans, ids[0]), false)
	if sums[0].Attempts != 2 || sums[0].Outcome != "ok" {
		t.Fatalf("%+v", sums[0])
	}
	for _, o := range outs {
		if string(o.Key) != "transient" && kafkatest.Header(o, "traceparent") != "" {
			t.Fatalf("unsampled output %s carries a traceparent", o.Key)
		}
	}
}

// At sample_ratio 0.01 a healthy record's attempt is begun only if it is
// kept (scheduler/internal/partition/trace.go), yet a record that fails is traced in full: each attempt
// span, its guest call span under it and within its time, the instance it
// ran on, and the retry and dead-letter produces — for a record processed
// in one call (enrich) as for one that waits on an operation (lookup).
func TestTraceFailuresInFullWhenSampled(t *testing.T) {
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint("h", i)), Value: []byte(`{"ok":1}`)})
	}
	poison := append(recs, &kgo.Record{Topic: "in", Key: []byte("poison"), Value: []byte(`{"fault":"retry"}`)})
	spans, _ := tracedRun(t, "0.01", poison, 50, 1)
	checkFailedTrace(t, spans, "poison", []string{"retry", "retry", "dead_letter"}, "wasm "+abi.ExportOnRecord, "wasm "+abi.ExportOnBatch)

	// Retried in place: each attempt is decided where it ran, the next one
	// begun as its child.
	transient := append(recs, &kgo.Record{Topic: "in", Key: []byte("transient"), Value: []byte(`{"fault":"transient","until":3}`)})
	spans, _ = tracedRun(t, "0.01", transient, 51, 0, "    retry: {mode: inline, max_attempts: 3, backoff: [10ms, 20ms]}")
	checkFailedTrace(t, spans, "transient", []string{"retry_inline", "retry_inline", "ok"}, "wasm "+abi.ExportOnRecord, "wasm "+abi.ExportOnBatch)

	// The lookup guest: "fail-1" is answered 503 once (a retryable failure
	// after its operation), then found.
	srv := lookupsrv.New(t, nil)
	recs = recs[:0]
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint("h", i)), Value: []byte(`"v"`)})
	}
	recs = append(recs, &kgo.Record{Topic: "in", Key: []byte("fail-1"), Value: []byte(`"v"`)})
	spans, _ = tracedRunOf(t, "lookup", "0.01", recs, 51, 0, asyncKeys(srv, ""))
	for _, att := range checkFailedTrace(t, spans, "fail-1", []string{"retry", "ok"}, "wasm "+abi.ExportOnRecord, "wasm "+abi.ExportOnBatch) {
		if !slices.ContainsFunc(att, func(s *tracing.Span) bool {
			return s.Attrs["wasmstream.async.kind"] == "http" || strings.HasPrefix(s.Name, "http ")
		}) {
			t.Fatalf("an attempt of the failed lookup has no operation span: %v", names(att))
		}
		// One call per completion, or its share of a call that delivered
		// several (ABI.md §10.1).
		if !slices.ContainsFunc(att, func(s *tracing.Span) bool {
			return s.Name == "wasm "+abi.ExportOnComplete || s.Name == "wasm "+abi.ExportOnCompletions
		}) {
			t.Fatalf("an attempt of the failed lookup has no completion call span: %v", names(att))
		}
	}
}

// checkFailedTrace checks the trace of the record keyed key: one attempt
// span per outcome in outcomes, each on an instance, with a guest call span
// named one of calls under it and within its time, and a retry or
// dead-letter produce under each attempt that ended so. It returns each attempt's
// child spans.
func checkFailedTrace(t *testing.T, spans []tracing.Span, key string, outcomes []string, calls ...string) [][]*tracing.Span {
	t.Helper()
	ids := tracing.Find(spans, tracing.Query{Key: key, Partition: -1, Offset: -1})
	if len(ids) != 1 {
		t.Fatalf("record %s in %d traces", key, len(ids))
	}
	tr := tracing.Trace(spans, ids[0])
	var attempts []*tracing.Span
	for i := range tr {
		if tr[i].Kind == "consumer" {
			attempts = append(attempts, &tr[i])
		}
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].Start.Before(attempts[j].Start) })
	if len(attempts) != len(outcomes) {
		t.Fatalf("record %s: %d attempt spans, want %d", key, len(attempts), len(outcomes))
	}
	children := make([][]*tracing.Span, len(attempts))
	for i, a := range attempts {
		if a.Attrs["wasmstream.outcome"] != outcomes[i] || a.Attrs["wasmstream.attempt"] != fmt.Sprint(i+1) {
			t.Fatalf("attempt %d of %s: %v", i+1, key, a.Attrs)
		}
		if id := a.Attrs["wasmstream.instance.id"]; id == "" || id == "0" {
			t.Fatalf("attempt %d of %s has no instance: %v", i+1, key, a.Attrs)
		}
		var call, produce *tracing.Span
		for j := range tr {
			s := &tr[j]
			if s.ParentID != a.SpanID {
				continue
			}
			children[i] = append(children[i], s)
			if slices.Contains(calls, s.Name) && call == nil {
				call = s
			}
			if k := s.Attrs["wasmstream.produce.kind"]; k == "retry" || k == "dead_letter" {
				produce = s
			}
		}
		if call == nil {
			t.Fatalf("attempt %d of %s has no guest call span: %v", i+1, key, names(children[i]))
		}
		if call.Start.Before(a.Start) || call.End.After(a.End) || call.End.Before(call.Start) {
			t.Fatalf("attempt %d of %s: its call %s–%s is not within it %s–%s", i+1, key, call.Start, call.End, a.Start, a.End)
		}
		if (outcomes[i] == "retry" || outcomes[i] == "dead_letter") != (produce != nil) {
			t.Fatalf("attempt %d of %s (%s): retry or dead-letter produce %v", i+1, key, outcomes[i], produce != nil)
		}
	}
	return children
}

func names(spans []*tracing.Span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}
