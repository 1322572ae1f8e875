package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// validate says which kind a module is: a Redpanda Data Transform (by its
// redpanda_transform imports) or a wasmstream module.
func TestValidateSaysKind(t *testing.T) {
	dir := t.TempDir()
	rp := filepath.Join(dir, "transform.wasm")
	if err := os.WriteFile(rp, wt.BuildWat(t, "tests/redpanda/wat/cpp_shape.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	native := filepath.Join(dir, "native.wasm")
	if err := os.WriteFile(native, wt.Minimal(wt.I32Const(0)).Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "validate", rp, native)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	rpPart, nativePart, _ := strings.Cut(out, native+": ok")
	if !strings.Contains(rpPart, "kind: Redpanda Data Transform") || strings.Contains(rpPart, "ABI version") ||
		!strings.Contains(rpPart, "redpanda_transform.read_batch_header") {
		t.Errorf("the transform's report:\n%s", rpPart)
	}
	if !strings.Contains(nativePart, "kind: wasmstream module") || !strings.Contains(nativePart, "ABI version: 1") {
		t.Errorf("the wasmstream module's report:\n%s", nativePart)
	}
}
