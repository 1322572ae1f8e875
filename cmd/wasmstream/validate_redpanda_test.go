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

// A Redpanda transform importing redpanda_schema_registry is refused by
// validate alone (no pipeline grants the registry), naming the key to set
// and --config; with --config it is checked as its pipeline runs it:
// accepted where the pipeline grants async.schema_registry, refused
// naming that pipeline's key where it does not.
func TestValidateRedpandaSchemaRegistry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod := filepath.Join(dir, "sr.wasm")
	if err := os.WriteFile(mod, wt.BuildWat(t, "cmd/wasmstream/testdata/sr_transform.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := func(name, async string) string {
		return writeFile(t, dir, name+".yaml", []byte(`kafka: {brokers: ["127.0.0.1:1"], group: g}
schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: decode
    module: sr.wasm
    inputs: [in]
    output: out
    dead_letter_topic: dlq
`+async))
	}
	granted := config("granted", "    async: {schema_registry: {enabled: true}}\n")
	denied := config("denied", "")

	code, out, errs := runCLI(t, "validate", mod)
	if code != 1 || !strings.Contains(errs, "set pipelines.<name>.async.schema_registry.enabled: true") || !strings.Contains(errs, "--config FILE [--pipeline NAME]") {
		t.Errorf("without --config: exit %d, want 1 naming the key and --config\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "validate", "--config", granted, mod)
	if code != 0 || !strings.Contains(out, "pipeline: decode") || !strings.Contains(out, "schema registry: granted (pipelines.decode.async.schema_registry)") ||
		!strings.Contains(out, "redpanda_schema_registry.check_abi_version_0") {
		t.Errorf("granted: exit %d, want 0 and the grant\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "validate", "--config", denied, "--pipeline", "decode", mod)
	if code != 1 || !strings.Contains(errs, "set pipelines.decode.async.schema_registry.enabled: true") || strings.Contains(errs, "--config FILE") {
		t.Errorf("not granted: exit %d, want 1 naming the pipeline's key\n%s%s", code, out, errs)
	}
	code, _, errs = runCLI(t, "validate", "--pipeline", "decode", mod)
	if code != 2 || !strings.Contains(errs, "--pipeline needs --config") {
		t.Errorf("--pipeline alone: exit %d\n%s", code, errs)
	}
}
