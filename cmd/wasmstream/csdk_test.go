package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// TestCSDK runs the C SDK's unit test (abi/sdk/c/wasmstream_test.c),
// compiled natively with the host functions its own: the record's offset,
// timestamp and partition as ABI.md §5.1's example has them, and the JSON
// writer's documents and refusals.
func TestCSDK(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatal("clang not found: the C SDK's test needs clang and the host's libc headers (the test command installs them)")
	}
	bin := filepath.Join(t.TempDir(), "wasmstream_test")
	src := filepath.Join(wt.RepoRoot(t), "abi/sdk/c/wasmstream_test.c")
	if out, err := exec.Command("clang", "-O1", "-Wall", "-Werror", "-Wno-unused-function", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("clang %s: %v\n%s", src, err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%s: %v\n%s", src, err, out)
	}
}

// TestCEnrichExample: the C SDK's enrich example (plugins/examples/c-enrich)
// adds where each record came from (topic, partition, offset, timestamp),
// its key and attempt to its JSON object with the SDK's JSON writer, and
// passes its own vectors (escaping, defaults, values that are not one
// JSON object) in the host.
func TestCEnrichExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod := writeFile(t, dir, "enrich.wasm", wt.BuildCGuest(t, "plugins/examples/c-enrich/enrich.c"))
	vectors := filepath.Join(wt.RepoRoot(t), "plugins/examples/c-enrich/vectors.jsonl")
	if _, err := os.Stat(vectors); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "test", mod, "--file", vectors)
	if code != 0 || !strings.Contains(out, "expectations: 8 passed, 0 failed") {
		t.Fatalf("code %d\n%s\n%s", code, out, errs)
	}
}
