package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// windowCountConfig writes the window-count example and a pipeline running
// it (windows of 1s, 100ms of grace) with extra YAML fields, and returns
// the module's and the config's paths.
func windowCountConfig(t *testing.T, dir, extra string) (mod, cfg string) {
	t.Helper()
	mod = writeFile(t, dir, "window-count.wasm", wt.BuildGoGuest(t, "plugins/examples/window-count"))
	cfg = writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
pipelines:
  - {name: w, module: window-count.wasm, inputs: [in], output: out, dead_letter_topic: dlq, state: {enabled: true}, retry: {mode: inline}, env: {WINDOW_SIZE: 1s, WINDOW_GRACE: 100ms}`+extra+`}
`))
	return mod, cfg
}

// An advance_to line moves the stream time without a record and fires the
// timers due, its expect checking their outputs: window [1000, 2000) stays
// open at 2099 and closes at 2100 (its end plus the grace); an advance
// line moves on by a duration and closes the next window. Without the
// control lines, nothing closes the windows (the records alone never
// reach 2100).
func TestTestCommandAdvanceTo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod, cfg := windowCountConfig(t, dir, "")
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"key": "k", "value": "a", "timestamp": 1000, "expect": {"outcome": "drop"}}
{"key": "k", "value": "b", "timestamp": 1500, "expect": {"outcome": "drop"}}
{"advance_to": 2099, "expect": {"outcome": "drop", "outputs": []}}
{"advance_to": 2100, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "1000 2000 2"}]}}
{"key": "k", "value": "c", "timestamp": 2200, "expect": {"outcome": "drop"}}
{"advance": "900ms", "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "2000 3000 1"}]}}
{"expect_state": {"timers": []}}
`))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
	if code != 0 || strings.Count(out, "expect: PASS") != 7 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"advance_to 2100 → stream time 2100", "advance 900ms → stream time 3100", "3 record(s): 0 ok, 3 dropped, 0 retry, 0 fail; 4 control line(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// An idle line simulates wall-clock time on a caught-up partition under
// timers.idle_advance, by the host's rule: every idle_advance (500ms) the
// stream time moves by 500ms and the due timers fire. 999ms is one round
// (1000 to 1500: the window [1000, 2000) stays open until 2100); a second
// is two more (2500), which close it. --json gives the firings, the idle
// rounds and the stream time.
func TestTestCommandIdle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod, cfg := windowCountConfig(t, dir, ", timers: {idle_advance: 500ms}")
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"key": "k", "value": "a", "timestamp": 1000, "expect": {"outcome": "drop"}}
{"idle": "999ms", "expect": {"outcome": "drop", "outputs": []}}
{"idle": "1s", "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "1000 2000 1"}]}}
`))
	code, out, errs := runCLI(t, "test", "--json", "--config", cfg, mod, "--file", vectors)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var doc struct {
		Records []struct {
			Control    string `json:"control"`
			StreamTime int64  `json:"stream_time"`
			IdleRounds int64  `json:"idle_rounds"`
			Outputs    []struct {
				Key, Value string
			} `json:"outputs"`
			Expect struct{ Pass bool } `json:"expect"`
		} `json:"records"`
		Failed int `json:"expectations_failed"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Records) != 3 || doc.Failed != 0 {
		t.Fatalf("%v\n%s", err, out)
	}
	r1, r2 := doc.Records[1], doc.Records[2]
	got := fmt.Sprintf("%s %d %d %d %s %d %d %v %v", r1.Control, r1.StreamTime, r1.IdleRounds, len(r1.Outputs),
		r2.Control, r2.StreamTime, r2.IdleRounds, r2.Outputs, r2.Expect.Pass)
	if want := "idle 1500 1 0 idle 2500 2 [{k 1000 2000 1}] true"; got != want {
		t.Fatalf("got  %s\nwant %s\n%s", got, want, out)
	}
}

// A state line preloads state before the next record, two-part keys
// (base64, as the window SDK keeps them: the window's name, 0, its start)
// and one-part ones (JSON), and timers; expect_state checks it. A count of
// 5 preloaded for window [1000, 2000) with its timer is continued by a
// record to 6, which advance_to closes.
func TestTestCommandPreloadedState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod, cfg := windowCountConfig(t, dir, "")
	sub := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64([]byte("count\x00"), uint64(1000)^1<<63))
	count := func(n uint64) string { return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, n)) }
	vectors := writeFile(t, dir, "v.jsonl", []byte(fmt.Sprintf(`{"state": {"put": [{"key": "k", "sub_base64": %[1]q, "value_base64": %[2]q}, {"key": "cfg", "value": {"a": 1, "b": [2, 3]}}], "timers": [{"key": "k", "at": 2100}]}}
{"expect_state": {"get": [{"key": "k", "sub_base64": %[1]q, "value_base64": %[2]q}, {"key": "cfg", "value": {"b": [2, 3], "a": 1}}, {"key": "k", "absent": true}], "timers": [{"key": "k", "at": 2100}]}}
{"key": "k", "value": "a", "timestamp": 1500, "expect": {"outcome": "drop"}}
{"expect_state": {"get": [{"key": "k", "sub_base64": %[1]q, "value_base64": %[3]q}, {"key": "cfg"}]}}
{"advance_to": 2100, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "1000 2000 6"}]}}
{"expect_state": {"get": [{"key": "k", "sub_base64": %[1]q, "absent": true}], "timers": []}}
`, sub, count(5), count(6))))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
	if code != 0 || strings.Count(out, "expect: PASS") != 5 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}

// An expect_state that does not hold fails the run (exit 1), field by
// field for JSON values, and --json gives the check.
func TestTestCommandExpectStateMismatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod, cfg := windowCountConfig(t, dir, "")
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"state": {"put": [{"key": "cfg", "value": {"a": 1, "b": "x"}}, {"key": "k", "sub": "s", "value": "v"}]}}
{"key": "k", "value": "a", "timestamp": 1000}
{"expect_state": {"get": [{"key": "cfg", "value": {"a": 2, "b": "x"}}, {"key": "k", "sub": "s", "absent": true}, {"key": "nope"}], "timers": [{"key": "k", "at": 9}]}}
`))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"expect: FAIL", `state "cfg".a: got 1, want 2`, `state "k"/"s": got "v", want absent`, `state "nope": absent, want set`,
		`timers: got [("k", 2100)], want [("k", 9)]`, "expectations: 0 passed, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "test", "--json", "--config", cfg, mod, "--file", vectors)
	if code != 1 || !strings.Contains(out, `"state_check": {`) || !strings.Contains(out, `"pass": false`) {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// A control line that is malformed, or that the pipeline cannot serve, is
// refused before anything runs (exit 2), naming its line; conformance
// --vectors, which runs records only, refuses control lines the same way.
func TestTestCommandBadControlLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod, cfg := windowCountConfig(t, dir, "")
	rec := `{"key": "k", "value": "a", "timestamp": 1000}` + "\n"
	for _, c := range []struct{ line, want string }{
		{`{"advance_to": 5, "idle": "1s"}`, "v.jsonl:2: a control line has one of advance_to, advance, idle, state, expect_state, not [advance_to idle]"},
		{`{"advance": "soon"}`, `v.jsonl:2: advance: "soon": want a positive duration`},
		{`{"advance_to": -1}`, "v.jsonl:2: advance_to: -1: want a timestamp of 0 or more"},
		{`{"idle": "45s"}`, "v.jsonl:2: idle: pipeline w has no timers.idle_advance"},
		{`{"state": {"put": [{"key": "k"}]}}`, "v.jsonl:2: state.put[0].value: want a value"},
		{`{"state": {}}`, `v.jsonl:2: state: want "put", "delete" or "timers" entries`},
		{`{"expect_state": {"get": [{"key": "k"}]}, "expect": {"outcome": "ok"}}`, "v.jsonl:2: expect: a expect_state line fires no timers"},
		{`{"advance_to": 5, "key": "k"}`, `v.jsonl:2: not a control line (advance_to, advance, idle, state, expect_state): json: unknown field "key"`},
	} {
		vectors := writeFile(t, dir, "v.jsonl", []byte(rec+c.line+"\n"))
		code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Contains(out, "──") {
			t.Errorf("%s: exit %d, want 2 and %q\nstdout: %s\nstderr: %s", c.line, code, c.want, out, errs)
		}
	}
	// Without state, no control line runs.
	nostate := writeFile(t, dir, "nostate.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
pipelines:
  - {name: n, module: window-count.wasm, inputs: [in], output: out, dead_letter_topic: dlq, retry: {mode: inline}}
`))
	vectors := writeFile(t, dir, "v.jsonl", []byte(rec+`{"advance_to": 5}`+"\n"))
	if code, _, errs := runCLI(t, "test", "--config", nostate, mod, "--file", vectors); code != 2 || !strings.Contains(errs, "v.jsonl:2: advance_to: pipeline n keeps no state") {
		t.Errorf("no state: exit %d\n%s", code, errs)
	}
	if code, _, errs := runCLI(t, "conformance", "--vectors", vectors, mod); code != 2 || !strings.Contains(errs, "v.jsonl:2: advance_to: a control line") {
		t.Errorf("conformance: exit %d\n%s", code, errs)
	}
}
