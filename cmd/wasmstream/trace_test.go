package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// traceFile is a traces file with a hostile error message and span name, two
// spans sharing an id and a parent cycle: what a corrupt or hand-made file
// can hold.
func traceFile(t *testing.T) string {
	const id = "0123456789abcdef0123456789abcdef"
	var b strings.Builder
	line := func(span, parent, name, attempt, errMsg string, ms int) {
		at := time.Date(2025, 1, 1, 0, 0, 0, ms*int(time.Millisecond), time.UTC).Format(time.RFC3339Nano)
		q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
		fmt.Fprintf(&b, `{"trace_id":%s,"span_id":%s,"parent_id":%s,"name":%s,"kind":"consumer","start":%s,"end":%s,"error":%s,"attrs":{"wasmstream.attempt":%s,"wasmstream.origin.topic":"in","wasmstream.pipeline":"p"}}`+"\n",
			q(id), q(span), q(parent), q(name), q(at), q(at), q(errMsg), q(attempt))
	}
	line("aa", "", "process in[0]@1", "1", hostile, 0)
	line("bb", "aa", "process "+hostile, "2", "", 1)
	line("bb", "bb", "shares its id", "3", hostile, 2)
	line("cc", "dd", "cycle one", "", "", 3)
	line("dd", "cc", "cycle two", "", "", 4)
	return writeFile(t, t.TempDir(), "traces.jsonl", []byte(b.String()))
}

// TestTraceCyclicAndHostileFile: `trace` answers on a file with an id cycle in
// bounded output, and prints guest text escaped, in the tree and in the
// --retried list.
func TestTraceCyclicAndHostileFile(t *testing.T) {
	file := traceFile(t)
	type result struct {
		code      int
		out, errs string
	}
	run := func(args ...string) result {
		t.Helper()
		ch := make(chan result, 1)
		go func() { c, o, e := runCLI(t, args...); ch <- result{c, o, e} }()
		select {
		case r := <-ch:
			return r
		case <-time.After(30 * time.Second):
			t.Fatalf("wasmstream %v did not return", args)
			return result{}
		}
	}
	r := run("trace", "--file", file, "--trace-id", "0123456789abcdef0123456789abcdef")
	if r.code != 0 || len(r.out) > 8192 || !strings.Contains(r.out, "cycle two") || !strings.Contains(r.out, `process \x1b]0;pwned`) {
		t.Fatalf("trace: code %d, %d bytes\n%.4000s\n%s", r.code, len(r.out), r.out, r.errs)
	}
	assertPrintable(t, "trace", r.out)
	r = run("trace", "--file", file, "--retried")
	if r.code != 0 || !strings.Contains(r.out, `last error: \x1b]0;pwned`) {
		t.Fatalf("trace --retried: code %d\n%s\n%s", r.code, r.out, r.errs)
	}
	assertPrintable(t, "trace --retried", r.out)
}

// --limit counts the records of --pipeline, not the records before the
// filter: with three newer retried records of another pipeline, --limit 1
// still lists the one of the pipeline asked for.
func TestTraceRetriedLimitAfterPipeline(t *testing.T) {
	var b strings.Builder
	rec := func(trace, pipeline string, ms int) {
		at := time.Date(2025, 1, 1, 0, 0, 0, ms*int(time.Millisecond), time.UTC).Format(time.RFC3339Nano)
		for attempt := 1; attempt <= 2; attempt++ {
			fmt.Fprintf(&b, `{"trace_id":%q,"span_id":"%s%d","name":"process in","kind":"consumer","start":%q,"end":%q,"attrs":{"wasmstream.attempt":"%d","wasmstream.origin.topic":"in","wasmstream.pipeline":%q}}`+"\n",
				trace, trace[:15], attempt, at, at, attempt, pipeline)
		}
	}
	rec("b0000000000000000000000000000001", "wanted", 0)
	for i := 1; i <= 3; i++ {
		rec(fmt.Sprintf("a000000000000000000000000000000%d", i), "other", i*10)
	}
	file := writeFile(t, t.TempDir(), "traces.jsonl", []byte(b.String()))
	code, out, errs := runCLI(t, "trace", "--file", file, "--retried", "--pipeline", "wanted", "--limit", "1")
	if code != 0 || !strings.Contains(out, "b0000000000000000000000000000001") || strings.Contains(out, "more (--limit)") {
		t.Fatalf("code %d\n%s\n%s", code, out, errs)
	}
}

// The file's rotated parts (tracing.max_files) are read with it, oldest
// first: a record whose first attempt went into <file>.1 before the
// rotation and its second into <file> is one record of two attempts.
func TestTraceReadsRotatedParts(t *testing.T) {
	t.Parallel()
	span := func(attempt int) string {
		at := time.Date(2025, 1, 1, 0, 0, attempt, 0, time.UTC).Format(time.RFC3339Nano)
		return fmt.Sprintf(`{"trace_id":"c0000000000000000000000000000001","span_id":"c00000000000000%d","name":"process in","kind":"consumer","start":%q,"end":%q,"attrs":{"wasmstream.attempt":"%d","wasmstream.origin.topic":"in","wasmstream.pipeline":"p"}}`+"\n",
			attempt, at, at, attempt)
	}
	dir := t.TempDir()
	file := writeFile(t, dir, "traces.jsonl", []byte(span(2)))
	writeFile(t, dir, "traces.jsonl.1", []byte(span(1)))
	code, out, errs := runCLI(t, "trace", "--file", file, "--retried")
	if code != 0 || !strings.Contains(out, "c0000000000000000000000000000001") || !strings.Contains(out, "attempts 2") {
		t.Fatalf("code %d\n%s\n%s", code, out, errs)
	}
}
