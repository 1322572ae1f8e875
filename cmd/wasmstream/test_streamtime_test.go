package main

import (
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// TestTestCommandStreamTime: `wasmstream test` keeps a stateful pipeline's
// stream time as a pipeline does (ABI.md §4.2): the largest timestamp of
// the records decided before, −1 before any, not moved back by an earlier
// one, and two-part keys kept from record to record (subs in byte order).
func TestTestCommandStreamTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod := writeFile(t, dir, "eventtime.wasm", wt.BuildGoGuest(t, "host/testdata/eventtime"))
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
pipelines:
  - {name: et, module: eventtime.wasm, inputs: [in], output: out, dead_letter_topic: dlq, state: {enabled: true}, retry: {mode: inline}}
`))
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"key": "k", "value": "a", "timestamp": 1000, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "-1 1000=a"}]}}
{"key": "k", "value": "b", "timestamp": 3000, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "1000 1000=a,3000=b"}]}}
{"key": "k", "value": "c", "timestamp": 2000, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "3000 1000=a,2000=c,3000=b"}]}}
{"key": "k", "value": "d", "timestamp": 500, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "3000 1000=a,2000=c,3000=b,500=d"}]}}
`))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
	if code != 0 || strings.Count(out, "expect: PASS") != 4 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}
