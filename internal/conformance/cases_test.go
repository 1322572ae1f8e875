package conformance

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

func TestParseCases(t *testing.T) {
	const file = `# a comment, then a blank line

{"name": "greeting", "key": "k", "value": "hello", "headers": {"b": "1", "a": null, "b": "2"}, "attempt": 3, "topic": "t", "partition": 2, "offset": 40, "timestamp": 7,
  "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "HELLO", "headers": {}}]}}
{"value": {"n": 1}, "key_base64": "AAH/", "http": [{"status": 404, "body": "gone"}, {"error": "reset"}], "expect": {"outcome": "retry", "fault": "deadline", "error": "late"}}
{}
`
	// The record of line 3 spans two lines in the file above: join them.
	cases, err := ParseCases(strings.NewReader(strings.Replace(file, "7,\n", "7,", 1)), "v.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 3 {
		t.Fatalf("%d cases, want 3", len(cases))
	}
	c := cases[0]
	r := c.Record
	if c.Name != "greeting" || c.Line != 3 || string(r.Key) != "k" || string(r.Value) != "hello" || r.Attempt != 3 || r.Topic != "t" || r.Partition != 2 || r.Offset != 40 || r.Timestamp != 7 {
		t.Errorf("case 0: %+v", c)
	}
	if HeadersString(r.Headers) != `{"b": "1", "a": null, "b": "2"}` {
		t.Errorf("headers in file order with repeats and null: %s", HeadersString(r.Headers))
	}
	e := c.Expect
	if e.Outcome != OutcomeOK || !e.HasOutputs || len(e.Outputs) != 1 || !e.Outputs[0].HasHeaders || len(e.Outputs[0].Headers) != 0 {
		t.Errorf("expect 0: %+v", e)
	}
	c = cases[1]
	if c.Name != "line 4" || string(c.Record.Value) != `{"n":1}` || string(c.Record.Key) != "\x00\x01\xff" || c.Record.Attempt != 1 || c.Record.Offset != 1 || c.Record.Topic != "" {
		t.Errorf("case 1: %+v", c.Record)
	}
	if len(c.HTTP) != 2 || c.HTTP[0].Status != 404 || string(c.HTTP[0].Body) != "gone" || c.HTTP[1].Error != "reset" {
		t.Errorf("http answers: %+v", c.HTTP)
	}
	if c.Expect.Outcome != OutcomeRetry || c.Expect.Fault != "deadline" || c.Expect.Error != "late" || c.Expect.HasOutputs {
		t.Errorf("expect 1: %+v", c.Expect)
	}
	if c := cases[2]; c.Record.Key != nil || c.Record.Value != nil || c.Expect != nil || c.Record.Offset != 2 {
		t.Errorf("an empty object is a record with null key and value: %+v", c)
	}
}

// A bad line is an error naming the file, the line and the field.
func TestParseCasesErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"{}\n\nnot json\n", "v.jsonl:3: not a record object"},
		{`{"valeu": "x"}`, `v.jsonl:1: not a record object: json: unknown field "valeu"`},
		{`{} {}`, "v.jsonl:1: not a record object: more than one JSON value"},
		{"{}\n" + `{"expect": {"outcome": "yes"}}`, `v.jsonl:2: expect.outcome: "yes": want ok, drop, retry or fail`},
		{`{"expect": {"outcome": "ok", "fault": "panic"}}`, `v.jsonl:1: expect.fault: "panic" with outcome "ok"`},
		{`{"expect": {"outcome": "fail", "fault": "boom"}}`, `v.jsonl:1: expect.fault: "boom": want one of trap, panic`},
		{`{"expect": {"outcome": "drop", "outputs": [{"value": "x"}]}}`, `v.jsonl:1: expect.outputs with outcome "drop"`},
		{`{"expect": {"outcome": "ok", "outputs": []}}`, `v.jsonl:1: expect.outputs is empty with outcome "ok"`},
		{`{"expect": {"outcome": "ok", "outputs": [{"headers": {"h": 1}}]}}`, `v.jsonl:1: expect.outputs[0].headers["h"]: want text or null`},
		{`{"headers": ["a"]}`, "v.jsonl:1: headers: want an object"},
		{`{"attempt": 0}`, "v.jsonl:1: attempt: 0: want 1 or more"},
		{`{"value": "x", "value_base64": "eA=="}`, "v.jsonl:1: value and value_base64: give one"},
		{`{"key_base64": "!!"}`, "v.jsonl:1: key_base64: illegal base64"},
		{`{"http": [{"status": 0}]}`, "v.jsonl:1: http[0].status: 0: want 100 to 599"},
		{"# only a comment\n", "v.jsonl: no records"},
	} {
		_, err := ParseCases(strings.NewReader(tc.file), "v.jsonl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.want)
		}
	}
}

func TestExpectCheck(t *testing.T) {
	parse := func(line string) *Expect {
		cs, err := ParseCases(strings.NewReader(line), "v")
		if err != nil {
			t.Fatal(err)
		}
		return cs[0].Expect
	}
	out := Decision{Outcome: OutcomeOK, Outputs: []abi.Output{{Partition: -1, Key: []byte("k"), Value: []byte(`{"b": 2, "a": [1]}`), Headers: []abi.Header{{Key: "h", Value: []byte("v")}}}}}
	if d := parse(`{"expect": {"outcome": "ok", "outputs": [{"key": "k", "value": {"a": [1], "b": 2}}]}}`).Check(out); d != nil {
		t.Errorf("a JSON value compares as JSON, headers unchecked when not given: %v", d)
	}
	d := parse(`{"expect": {"outcome": "ok", "outputs": [{"topic": "other", "key": null, "value": "x", "headers": {}}]}}`).Check(out)
	want := []string{`output 0 topic: got the pipeline's output, want "other"`, `output 0 key: got "k", want null`, `output 0 value: got "{\"b\": 2, \"a\": [1]}", want "x"`, `output 0 headers: got {"h": "v"}, want {}`}
	if strings.Join(d, "\n") != strings.Join(want, "\n") {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(d, "\n"), strings.Join(want, "\n"))
	}
	fault := Decision{Outcome: OutcomeRetry, Fault: host.FaultPanic, Message: "guest fault (panic): boom"}
	if d := parse(`{"expect": {"outcome": "retry", "fault": "panic", "error": "boom"}}`).Check(fault); d != nil {
		t.Errorf("fault: %v", d)
	}
	if d := parse(`{"expect": {"outcome": "fail", "error": "bang"}}`).Check(fault); len(d) != 1 || !strings.Contains(d[0], "outcome: got retry (panic fault): guest fault (panic): boom, want fail") {
		t.Errorf("wrong outcome: %v", d)
	}
	if d := parse(`{"expect": {"outcome": "drop"}}`).Check(out); len(d) != 1 || d[0] != "outcome: got ok with 1 output(s), want drop" {
		t.Errorf("drop: %v", d)
	}
}

// The ABI checks hold for a module that is none of the examples: one that
// drops every record (it never reads one). A module that traps on every
// record fails them, and no check's message ends in "<nil>".
func TestABIChecksOnCustomModules(t *testing.T) {
	ctx := context.Background()
	drop := wt.Minimal(wt.I32Const(0)).Bytes()
	rep, err := CheckModule(ctx, engine(), drop, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("a module that drops every record fails the ABI checks:\n%s", rep)
	}
	cases, err := ParseCases(strings.NewReader(`{"value": "x", "expect": {"outcome": "drop"}}`+"\n"+`{"value": "y", "expect": {"outcome": "ok"}}`), "v.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	rep, err = CheckModule(ctx, engine(), drop, Options{Cases: cases, File: "v.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) != 1 || f[0].Name != "vectors: line 2" || f[0].Detail != "outcome: got drop, want ok" {
		t.Errorf("user vectors: %+v", f)
	}
	reports := []*Report{rep}
	for _, bad := range [][]byte{
		wt.Minimal(wt.Unreachable).Bytes(), // traps on every record
		wt.Minimal(wt.I32Const(7)).Bytes(), // an invalid status
		[]byte("not wasm"),
	} {
		rep, err := CheckModule(ctx, engine(), bad, Options{Example: "uppercase"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || len(rep.Failed()) == 0 || !strings.HasPrefix(rep.Failed()[0].Name, "abi: ") {
			t.Errorf("a broken module passed the ABI checks: %+v", rep.Failed())
		}
		reports = append(reports, rep)
	}
	for _, rep := range reports {
		for _, c := range rep.Checks {
			if strings.HasSuffix(c.Detail, "<nil>") || !c.Pass && c.Detail == "" {
				t.Errorf("check %q: detail %q", c.Name, c.Detail)
			}
		}
	}
}
