package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

var uppercaseOnce struct {
	sync.Once
	b []byte
}

// uppercaseWasm is the C uppercase example (the same outputs as Go's, a
// module a hundred times smaller: it compiles at once, under -race too),
// built once per test binary.
func uppercaseWasm(t *testing.T) []byte {
	uppercaseOnce.Do(func() { uppercaseOnce.b = wt.BuildCGuest(t, "plugins/examples/c-uppercase/uppercase.c") })
	if uppercaseOnce.b == nil {
		t.Fatal("the uppercase example did not build")
	}
	return uppercaseOnce.b
}

// wasmstream test runs a real module on records from flags and from a
// vectors file, prints outcomes, outputs (escaped) and traces, and exits 1
// on a failed expectation with the difference, 2 on a bad module or file.
func TestTestCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache")) // the compile cache: one compile for every run below
	mod := writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))

	code, out, errs := runCLI(t, "test", mod, "--key", "k", "--header", "h=v", "--record", "hello", "--record", "\x1b]0;title\x07bye")
	if code != 0 {
		t.Fatalf("flags: code %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		`── --record 1: key "k" value "hello" headers "h"="v"`,
		`→ output 0 to (the pipeline's output): key "k" value "HELLO" headers "h"="v"`,
		`value "\x1b]0;TITLE\a`, // strconv's escapes: nothing raw reaches the terminal
		"process in[0]@0 · attempt 1 · ok",
		"└─ wasm wasmstream_on_record",
		"2 record(s): 2 ok, 0 dropped, 0 retry, 0 fail",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.ContainsRune(out, 0x1b) {
		t.Error("an escape character reached the output raw")
	}

	vectors := writeFile(t, dir, "v.jsonl", []byte(`# uppercase's vectors
{"key": "k", "value": "hello", "headers": {"h": "v"}, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "HELLO", "headers": {"h": "v"}}]}}
{"name": "wrong", "key": "k", "value": "hi", "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "hi"}]}}
{"value": "no expectation"}
`))
	code, out, errs = runCLI(t, "test", mod, "--file", vectors)
	if code != 1 {
		t.Fatalf("a failed expectation: code %d, want 1\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"── line 2: key \"k\" value \"hello\"",
		"expect: PASS",
		"── wrong (line 3): key \"k\" value \"hi\"",
		"expect: FAIL\n    output 0 value: got \"HI\", want \"hi\"\n",
		"3 record(s): 3 ok, 0 dropped, 0 retry, 0 fail; expectations: 1 passed, 1 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}

	code, out, _ = runCLI(t, "test", "--json", mod, "--file", vectors)
	var doc struct {
		Records []struct {
			Name    string
			Outcome string
			Outputs []struct{ Key, Value string }
			Trace   []struct{ Name string }
			Expect  *struct {
				Pass bool
				Diff []string
			}
		}
		ExpectationsFailed int `json:"expectations_failed"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 {
		t.Fatalf("--json: code %d, %v\n%s", code, err, out)
	}
	if len(doc.Records) != 3 || doc.ExpectationsFailed != 1 || doc.Records[1].Expect == nil || doc.Records[1].Expect.Pass ||
		doc.Records[1].Expect.Diff[0] != `output 0 value: got "HI", want "hi"` || doc.Records[2].Expect != nil ||
		doc.Records[0].Outputs[0].Value != "HELLO" || len(doc.Records[0].Trace) < 2 {
		t.Errorf("--json: %+v", doc)
	}

	// A module's fault is an outcome, with its kind: a trap on every
	// record, expected, passes.
	trap := writeFile(t, dir, "trap.wasm", wt.Minimal(wt.Unreachable).Bytes())
	tv := writeFile(t, dir, "trap.jsonl", []byte(`{"value": "x", "expect": {"outcome": "retry", "fault": "trap"}}`+"\n"))
	if code, out, errs := runCLI(t, "test", trap, "--file", tv); code != 0 || !strings.Contains(out, "retry (trap fault): guest fault (trap)") || !strings.Contains(out, "expect: PASS") {
		t.Errorf("trap: code %d\n%s\n%s", code, out, errs)
	}

	// The config's pipeline: its output topic, its environment.
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
pipelines:
  - {name: up, module: uppercase.wasm, inputs: [words], output: shouted, dead_letter_topic: dlq}
`))
	if code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--record", "a"); code != 0 || !strings.Contains(out, `→ output 0 to shouted (the pipeline's output): key null value "A"`) || !strings.Contains(out, "record words[0]@0") {
		t.Errorf("--config: code %d\n%s\n%s", code, out, errs)
	}

	// Bad input: exit 2, naming the file and line or the module.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"test", mod, "--file", writeFile(t, dir, "bad.jsonl", []byte("{}\n{\"expect\": {\"outcome\": \"maybe\"}}\n"))}, "bad.jsonl:2: expect.outcome: \"maybe\""},
		{[]string{"test", writeFile(t, dir, "text.wasm", []byte("hello")), "--record", "x"}, "not a WebAssembly module"},
		{[]string{"test", filepath.Join(dir, "absent.wasm"), "--record", "x"}, "absent.wasm"},
		{[]string{"test", mod, "--record", "x", "--header", "novalue"}, `--header "novalue": want k=v`},
		{[]string{"test", mod}, "Usage:"},
		{[]string{"test", "--config", cfg, "--pipeline", "nope", mod, "--record", "x"}, `--pipeline "nope"`},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: code %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// wasmstream conformance on a module of one's own: the ABI checks pass
// without --example, a vectors file adds its records, a bad one is exit 2
// naming its line.
func TestConformanceCustomModule(t *testing.T) {
	dir := t.TempDir()
	drop := writeFile(t, dir, "drop.wasm", wt.Minimal(wt.I32Const(0)).Bytes()) // drops every record
	code, out, errs := runCLI(t, "conformance", drop)
	if code != 0 || !strings.Contains(out, "PASS  abi: record 50-headers is decided without a fault") || !regexpMatch(`abi: (\d+) of (\d+) checks passed`, out) || strings.Contains(out, "FAIL") {
		t.Fatalf("ABI checks: code %d\n%s\n%s", code, out, errs)
	}
	v := writeFile(t, dir, "v.jsonl", []byte(`{"value": "x", "expect": {"outcome": "drop"}}`+"\n"+`{"value": "y", "expect": {"outcome": "ok"}}`+"\n"))
	code, out, _ = runCLI(t, "conformance", "--quiet", "--vectors", v, drop)
	if code != 1 || !strings.Contains(out, "FAIL  vectors: line 2: outcome: got drop, want ok") || !strings.Contains(out, " checks passed") || strings.Count(out, "FAIL") != 1 {
		t.Errorf("vectors: code %d\n%s", code, out)
	}
	bad := writeFile(t, dir, "bad.jsonl", []byte("{}\n{\"key\": 1, \"value\": \n"))
	if code, _, errs := runCLI(t, "conformance", "--vectors", bad, drop); code != 2 || !strings.Contains(errs, "bad.jsonl:2: not a record object") {
		t.Errorf("bad vectors: code %d, %s", code, errs)
	}
}

func regexpMatch(re, s string) bool {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	return m != nil && m[1] == m[2]
}
