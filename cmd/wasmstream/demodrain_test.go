package main

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/scheduler"
)

// TestDemoStopsWhenInputDrained: demo --input stops once every pipeline
// has done every line, and says so, instead of idling for the rest of
// --duration.
func TestDemoStopsWhenInputDrained(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [embedded], group: g, create_topics: true}
admin: {enabled: false}
metrics: {listen: "127.0.0.1:0"}
pipelines:
  - name: up
    module: uppercase.wasm
    inputs: [words]
    output: shouted
    dead_letter_topic: dlq
`))
	in := writeFile(t, dir, "in.txt", []byte("one\ntwo\nthree\n"))
	// A minute of --duration, which a demo that idles after its input
	// waits out without the message.
	code, out, errs := runCLI(t, "demo", "--config", cfg, "--lookup-service", "", "--input", in, "--duration", "1m")
	if code != 0 {
		t.Fatalf("demo: code %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"← shouted          ONE", "← shouted          THREE", "── " + in + ": every record done by every pipeline; stopping (--input drained)", "[up] done 3 · outputs 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "THREE"), strings.Index(out, "(--input drained)"); i < 0 || j < i {
		t.Errorf("drained said before the last output was printed\n%s", out)
	}
}

// TestDemoDrained: a pipeline is drained when it and its retry tier
// (<name>.retry) have done its input's records plus every record either
// sent to a retry tier, none in flight.
func TestDemoDrained(t *testing.T) {
	t.Parallel()
	want := map[string]int64{"up": 3, "look.up": 2}
	for _, tc := range []struct {
		name  string
		snaps []scheduler.Snapshot
		ok    bool
	}{
		{"all done", []scheduler.Snapshot{{Name: "up", Done: 3}, {Name: "look.up", Done: 2}}, true},
		{"one short", []scheduler.Snapshot{{Name: "up", Done: 3}, {Name: "look.up", Done: 1}}, false},
		{"in flight", []scheduler.Snapshot{{Name: "up", Done: 3, InFlight: 1}, {Name: "look.up", Done: 2}}, false},
		{"a retry waiting", []scheduler.Snapshot{{Name: "up", Done: 3, Retried: 1}, {Name: "up.retry"}, {Name: "look.up", Done: 2}}, false},
		{"a retry done", []scheduler.Snapshot{{Name: "up", Done: 3, Retried: 1}, {Name: "up.retry", Done: 1}, {Name: "look.up", Done: 2}}, true},
		{"retried twice", []scheduler.Snapshot{{Name: "up", Done: 3, Retried: 1}, {Name: "up.retry", Done: 1, Retried: 1}, {Name: "look.up", Done: 2}}, false},
		{"retried twice, done", []scheduler.Snapshot{{Name: "up", Done: 3, Retried: 1}, {Name: "up.retry", Done: 2, Retried: 1}, {Name: "look.up", Done: 2}}, true},
	} {
		if got := demoDrained(tc.snaps, want); got != tc.ok {
			t.Errorf("%s: drained %v, want %v", tc.name, got, tc.ok)
		}
	}
}
