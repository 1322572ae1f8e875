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
	testStatefulVectors(t, "host/testdata/eventtime", "", `{"key": "k", "value": "a", "timestamp": 1000, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "-1 1000=a"}]}}
{"key": "k", "value": "b", "timestamp": 3000, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "1000 1000=a,3000=b"}]}}
{"key": "k", "value": "c", "timestamp": 2000, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "3000 1000=a,2000=c,3000=b"}]}}
{"key": "k", "value": "d", "timestamp": 500, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "3000 1000=a,2000=c,3000=b,500=d"}]}}
`)
}

// `wasmstream test` fires the timers a record makes due after it, as a
// pipeline does before its next record (ABI.md §4.2): the window-count
// example's window [1000, 2000) with 100 ms of grace closes with the
// record at 2100, whose outputs carry its count; a record before it
// closes nothing, one after it for the closed window is late.
func TestTestCommandFiresTimers(t *testing.T) {
	t.Parallel()
	testStatefulVectors(t, "plugins/examples/window-count", "{WINDOW_SIZE: 1s, WINDOW_GRACE: 100ms}", `{"key": "k", "value": "a", "timestamp": 1000, "expect": {"outcome": "drop"}}
{"key": "k", "value": "b", "timestamp": 1500, "expect": {"outcome": "drop"}}
{"key": "k", "value": "c", "timestamp": 2100, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "1000 2000 2"}]}}
{"key": "k", "value": "d", "timestamp": 1999, "expect": {"outcome": "drop"}}
`)
}

// testStatefulVectors builds the Go guest at src (a directory of the
// repository), runs `wasmstream test` on vectors in a pipeline with
// state.enabled (env its env map, "" for none) and requires every
// expectation to pass.
func testStatefulVectors(t *testing.T, src, env, vectors string) {
	t.Helper()
	dir := t.TempDir()
	mod := writeFile(t, dir, "guest.wasm", wt.BuildGoGuest(t, src))
	if env == "" {
		env = "{}"
	}
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
pipelines:
  - {name: p, module: guest.wasm, inputs: [in], output: out, dead_letter_topic: dlq, state: {enabled: true}, retry: {mode: inline}, env: `+env+`}
`))
	file := writeFile(t, dir, "v.jsonl", []byte(vectors))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", file)
	if want := strings.Count(vectors, `"expect"`); code != 0 || strings.Count(out, "expect: PASS") != want {
		t.Fatalf("exit %d (want %d expectations passed)\n%s\n%s", code, want, out, errs)
	}
}
