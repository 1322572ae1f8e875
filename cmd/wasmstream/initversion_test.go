package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// TestInitPinsVersion: a generated project records the commit of the
// checkout its SDK is copied from (.wasmstream-version); its CI installs
// that version, not @latest, and its Makefile runs that version when no
// wasmstream is on PATH; neither names a path into the checkout.
func TestInitPinsVersion(t *testing.T) {
	t.Parallel()
	root := wt.RepoRoot(t)
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD in %s: %v", root, err)
	}
	want := strings.TrimSpace(string(head))
	for _, lang := range []string{"go", "c", "rust", "assemblyscript"} {
		dir := filepath.Join(t.TempDir(), "p-"+lang)
		if code, out, errs := runCLI(t, "init", "--lang", lang, "--sdk", root, dir); code != 0 {
			t.Fatalf("init --lang %s: code %d\n%s\n%s", lang, code, out, errs)
		}
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		if got := strings.TrimSpace(read(".wasmstream-version")); got != want {
			t.Errorf("%s: .wasmstream-version %q, want the checkout's commit %s", lang, got, want)
		}
		ci, mk := read(".github/workflows/ci.yml"), read("Makefile")
		if !strings.Contains(ci, `go install "github.com/wasmstream/wasmstream/cmd/wasmstream@$(cat .wasmstream-version)"`) || strings.Contains(ci, "@latest") {
			t.Errorf("%s: the CI does not install .wasmstream-version's wasmstream:\n%s", lang, ci)
		}
		if !strings.Contains(mk, "go run github.com/wasmstream/wasmstream/cmd/wasmstream@$(WASMSTREAM_VERSION)") {
			t.Errorf("%s: the Makefile does not fall back on .wasmstream-version's wasmstream:\n%s", lang, mk)
		}
		for name, text := range map[string]string{"ci.yml": ci, "Makefile": mk} {
			if strings.Contains(text, root) {
				t.Errorf("%s: %s names the checkout %s", lang, name, root)
			}
		}
	}
	// make resolves the fallback to that version: what it would run,
	// without wasmstream on PATH.
	dir := filepath.Join(t.TempDir(), "p")
	if code, out, errs := runCLI(t, "init", "--lang", "c", "--sdk", root, dir); code != 0 {
		t.Fatalf("init: code %d\n%s\n%s", code, out, errs)
	}
	cmd := exec.Command("make", "-s", "-n", "validate")
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), "WASMSTREAM"), "PATH=/usr/bin:/bin", "MAKEFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "go run github.com/wasmstream/wasmstream/cmd/wasmstream@"+want+" validate p.wasm") {
		t.Errorf("make -n validate: %v\n%s", err, out)
	}
}

// withoutEnv is env without the variable name.
func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
