package main

import (
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// `wasmstream test` fires the timers a record makes due after it, as a
// pipeline does before its next record (ABI.md §4.2): the window-count
// example's window [1000, 2000) with 100 ms of grace closes with the
// record at 2100, whose outputs carry its count; a record before it
// closes nothing, one after it for the closed window is late.
func TestTestCommandFiresTimers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod := writeFile(t, dir, "window-count.wasm", wt.BuildGoGuest(t, "plugins/examples/window-count"))
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
pipelines:
  - {name: w, module: window-count.wasm, inputs: [in], output: out, dead_letter_topic: dlq, state: {enabled: true}, retry: {mode: inline}, env: {WINDOW_SIZE: 1s, WINDOW_GRACE: 100ms}}
`))
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"key": "k", "value": "a", "timestamp": 1000, "expect": {"outcome": "drop"}}
{"key": "k", "value": "b", "timestamp": 1500, "expect": {"outcome": "drop"}}
{"key": "k", "value": "c", "timestamp": 2100, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "1000 2000 2"}]}}
{"key": "k", "value": "d", "timestamp": 1999, "expect": {"outcome": "drop"}}
`))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
	if code != 0 || strings.Count(out, "expect: PASS") != 4 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}
