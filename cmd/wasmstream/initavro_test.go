package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// init --template avro: a Go project created (the template is Go only:
// no --lang needed), built with its Makefile,
// and its make test run offline: the unit test, then wasmstream test on
// vectors.jsonl framed with schemas/*.avsc (served by --schema, no
// registry) — every expectation met, the host's own refusal of a record
// that is not framed among them — and the ABI checks; then make demo on
// sample.jsonl: the orders framed, their totals out as the host encoded
// them (read back), the order without items dead-lettered. The project's
// make runs the wasmstream command of this source, built here (a stale
// bin/wasmstream would not know --schema). The template has no other
// language, and init says so.
func TestInitAvroTemplate(t *testing.T) {
	t.Parallel()
	k := newTemplateKit(t, "avro")
	// The template is Go only: no --lang needed.
	dir := filepath.Join(t.TempDir(), "orders")
	out := k.initAndTest(t, "", dir, `the Go processor "orders", template avro`)
	for _, want := range []string{
		"(value framed: schema id 1, ",
		`→ output 0 to orders-totals (the pipeline's output): key "o-1" value "{\"order_id\":\"o-1\",\"customer\":\"ann\",\"placed_at\":\"2024-01-15T10:04:05.123Z\",\"item_count\":3,\"total_cents\":1600,\"coupon\":null}" (value framed: schema id 2, `,
		"fail (schema.bad_frame, in the host): value: no schema-registry frame",
		"4 record(s): 2 ok, 0 dropped, 0 retry, 2 fail; expectations: 4 passed, 0 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make test lacks %q\n%s", want, out)
		}
	}
	if !abiAllPassed(out) {
		t.Errorf("make test: the ABI checks did not all pass\n%s", out)
	}

	out = k.make(t, dir, "demo", "DEMO_FLAGS=--duration 10s")
	for _, want := range []string{
		`→ orders           {"id":"o-2","customer":"bob","placed_at":"2024-01-15T11:00:00Z","items":[{"sku":"pot","quantity":1,"unit_price_cents":2500}],"coupon":"SPRING10"}  (framed: schema id 1)`,
		`← orders-totals    {"order_id":"o-2","customer":"bob","placed_at":"2024-01-15T11:00:00Z","item_count":1,"total_cents":2500,"coupon":"SPRING10"}  (framed: schema id 2)`,
		"guest.fail: order o-3 has no items",
		"[orders] done 3 · outputs 2 · dropped (no output) 0 · retried 0 · dead-lettered 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make demo lacks %q\n%s", want, out)
		}
	}

	k.refusesLang(t, "rust", "Rust")
}
