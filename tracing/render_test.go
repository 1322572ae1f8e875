package tracing

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// cyclicJSONL is a traces file a host never writes but a disk or an editor
// can: two spans sharing an id (each other's parent through it), a span that
// is its own parent, and a two-span parent cycle.
func cyclicJSONL() string {
	const id = "0123456789abcdef0123456789abcdef"
	line := func(span, parent, name string, ms int) string {
		t := time.Date(2025, 1, 1, 0, 0, 0, ms*int(time.Millisecond), time.UTC).Format(time.RFC3339Nano)
		return fmt.Sprintf(`{"trace_id":%q,"span_id":%q,"parent_id":%q,"name":%q,"kind":"consumer","start":%q,"end":%q,"attrs":{"wasmstream.attempt":"1"}}`+"\n", id, span, parent, name, t, t)
	}
	return line("aa", "", "root", 0) +
		line("bb", "aa", "child", 1) +
		line("bb", "bb", "same id as its parent", 2) +
		line("cc", "cc", "its own parent", 3) +
		line("dd", "ee", "cycle one", 4) +
		line("ee", "dd", "cycle two", 5)
}

// TestRenderCyclicTrace: spans sharing an id or forming a parent cycle are
// each printed once; the file's inconsistency is said; the output is small.
func TestRenderCyclicTrace(t *testing.T) {
	spans, err := ReadJSONL(strings.NewReader(cyclicJSONL()))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { defer close(done); Render(&buf, spans) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Render did not return: it loops on a cyclic trace")
	}
	out := buf.String()
	if buf.Len() > 4096 {
		t.Fatalf("%d bytes of output for 6 spans", buf.Len())
	}
	for _, name := range []string{"root", "child", "same id as its parent", "its own parent", "cycle one", "cycle two"} {
		if n := strings.Count(out, name+" · attempt"); n != 1 {
			t.Errorf("span %q printed %d times:\n%s", name, n, out)
		}
	}
	if !strings.Contains(out, "parents form a cycle") {
		t.Errorf("the inconsistency is not said:\n%s", out)
	}
}

// TestRenderBounds: a chain deeper than MaxRenderDepth and a trace wider than
// MaxRenderSpans print a bounded tree and count the rest.
func TestRenderBounds(t *testing.T) {
	const deep = 5000
	var spans []Span
	for i := 0; i < deep; i++ {
		s := Span{TraceID: "t", SpanID: fmt.Sprint(i), Name: "n", Start: time.Unix(0, int64(i))}
		if i > 0 {
			s.ParentID = fmt.Sprint(i - 1)
		}
		spans = append(spans, s)
	}
	var buf bytes.Buffer
	Render(&buf, spans)
	if got := strings.Count(buf.String(), "\n"); got > MaxRenderDepth+3 {
		t.Fatalf("a %d-deep chain printed %d lines", deep, got)
	}
	if want := fmt.Sprintf("… %d more spans not shown", deep-MaxRenderDepth); !strings.Contains(buf.String(), want) {
		t.Fatalf("no %q in the output's end: %s", want, buf.String()[max(0, buf.Len()-300):])
	}
	spans = spans[:0]
	for i := 0; i < MaxRenderSpans+10; i++ {
		spans = append(spans, Span{TraceID: "t", SpanID: fmt.Sprint(i), Name: "n"})
	}
	buf.Reset()
	Render(&buf, spans)
	if !strings.Contains(buf.String(), "… 10 more spans not shown") {
		t.Fatalf("a trace of %d spans: %s", len(spans), buf.String()[max(0, buf.Len()-300):])
	}
}

// TestRenderEscapes: a span's name, attributes and error are printed without
// the terminal controls they hold.
func TestRenderEscapes(t *testing.T) {
	const hostile = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
	spans := []Span{{TraceID: "t" + hostile, SpanID: "a", Name: "process " + hostile, Kind: "consumer", Error: "failed: " + hostile,
		Attrs: map[string]string{"wasmstream.attempt": "1" + hostile, "wasmstream.outcome": hostile, "messaging.kafka.message.key": hostile, "wasmstream.pipeline": hostile}}}
	var buf bytes.Buffer
	Render(&buf, spans)
	assertPrintable(t, buf.String())
	if !strings.Contains(buf.String(), `process \x1b]0;pwned\x07\x1b[2J\x9b31m`) {
		t.Fatalf("escaped name missing:\n%s", buf.String())
	}
}

func assertPrintable(t *testing.T, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("invalid UTF-8 printed raw:\n%q", out)
	}
	for _, r := range out {
		if r != '\n' && unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Fatalf("control %U printed raw:\n%q", r, out)
		}
	}
}

func TestReadJSONLTailKeepsTheNewest(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, `{"trace_id":"t","span_id":"%d"}`+"\n", i)
	}
	spans, skipped, err := ReadJSONLTail(strings.NewReader(b.String()), 100, 1<<20)
	if err != nil || skipped != 4900 || len(spans) != 100 || spans[0].SpanID != "4900" || spans[99].SpanID != "4999" {
		t.Fatalf("kept %d (first %v), skipped %d, err %v", len(spans), spans[0].SpanID, skipped, err)
	}
	_, _, err = ReadJSONLTail(strings.NewReader("{}\n"+strings.Repeat("x", MaxLineBytes+1)), 100, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "line 2: longer than") {
		t.Fatalf("over-long line: %v", err)
	}
}

// FuzzTraceFile: any traces file is read, summarised and rendered in bounded
// output without a raw control character, or refused with an error.
func FuzzTraceFile(f *testing.F) {
	f.Add(cyclicJSONL())
	f.Add(`{"trace_id":"x","span_id":"a","parent_id":"a"}` + "\n" + `{"trace_id":"x","span_id":"a","parent_id":"b","name":"\u001b[2J"}`)
	f.Add(`{"trace_id":"x","span_id":"","parent_id":"","kind":"producer","attrs":{"messaging.destination.partition.id":"\u009b"}}`)
	f.Fuzz(func(t *testing.T, file string) {
		spans, _, err := ReadJSONLTail(strings.NewReader(file), 1000, 1<<20)
		if err != nil {
			return
		}
		Summarize(spans, true)
		for _, id := range Find(spans, Query{Partition: -1, Offset: -1}) {
			var buf bytes.Buffer
			Render(&buf, Trace(spans, id))
			// Bounded by the spans read: one line each (of bounded length),
			// plus the header and notes.
			if limit := (len(spans) + 4) * (3*MaxRenderDepth + 6*maxFieldBytes + 200); buf.Len() > limit {
				t.Fatalf("%d bytes of output for %d spans", buf.Len(), len(spans))
			}
			assertPrintable(t, buf.String())
		}
		var buf bytes.Buffer
		Render(&buf, spans)
		assertPrintable(t, buf.String())
	})
}
