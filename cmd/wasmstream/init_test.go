package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/conformance"
)

// make runs make in dir with args, failing the test with its output.
func runMake(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s"}, args...)...)
	cmd.Dir = dir
	// No network: the Go and Rust SDKs are copies in the project (no
	// module or crate to fetch), the AssemblyScript compiler is the SDK's
	// installed one (shareASCompiler).
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "GOPROXY=off", "CARGO_NET_OFFLINE=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestInitEveryLanguage creates a project in each language with the
// default template, moves it (the SDK is vendored: it must build away from
// where it was made), builds it with its Makefile, runs its unit test,
// validates the module and checks it with the conformance kit (the starter
// is an uppercase processor); in C, also runs it in the demo with the
// project's config.yaml. Then the filter template: built, unit-tested (its test
// asserts kept, dropped and dead-lettered records) and validated; in Go,
// also run in the demo on its sample.jsonl (demo --input), whose summary
// must count 3 outputs, 1 dropped and 2 dead-lettered. The
// toolchains are those the test command installs (Go, clang and wasi-libc,
// node and the AssemblyScript SDK's compiler, Rust as
// abi/sdk/rust/wasm-target.sh finds it); a missing one fails the test.
func TestInitEveryLanguage(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make not found (the test command installs it)")
	}
	root := wt.RepoRoot(t)
	wt.InstallASSDK(t)
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	for _, lang := range []string{"go", "c", "assemblyscript", "rust"} {
		t.Run(lang, func(t *testing.T) {
			made := filepath.Join(t.TempDir(), "My_Proc."+lang)
			code, out, errs := runCLI(t, "init", "--lang", lang, "--sdk", root, made)
			if code != 0 || !strings.Contains(out, "created") {
				t.Fatalf("init: code %d\n%s\n%s", code, out, errs)
			}
			name := "my-proc-" + lang
			for _, f := range []string{"Makefile", "config.yaml", "README.md", ".gitignore", ".github/workflows/ci.yml"} {
				if _, err := os.Stat(filepath.Join(made, f)); err != nil {
					t.Fatalf("no %s: %v", f, err)
				}
			}
			dir := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(made, dir); err != nil {
				t.Fatal(err)
			}
			shareASCompiler(t, root, lang, dir)
			runMake(t, dir)
			t.Logf("make test:\n%s", runMake(t, dir, "test"))
			wasm := filepath.Join(dir, name+".wasm")
			if code, out, errs := runCLI(t, "validate", wasm); code != 0 || !strings.Contains(out, "ABI version: 1") {
				t.Fatalf("validate: code %d\n%s\n%s", code, out, errs)
			}
			b, err := os.ReadFile(wasm)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := conformance.Run(context.Background(), e, b, "uppercase")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				var sb strings.Builder
				rep.Write(&sb)
				t.Fatalf("the starter does not conform:\n%s", sb.String())
			}
			if lang == "c" { // the demo with the project's config and generated input: once is enough (conformance ran the module in every language)
				code, out, errs = runCLI(t, "demo", "--config", filepath.Join(dir, "config.yaml"), "--lookup-service", "", "--duration", "10s", "--rate", "20")
				if code != 0 || !strings.Contains(out, "← "+name+"-out") || !strings.Contains(out, "HELLO FROM WASMSTREAM") {
					t.Fatalf("demo: code %d\n%s\n%s", code, out, errs)
				}
			}

			filter := filepath.Join(t.TempDir(), "filter")
			if code, out, errs := runCLI(t, "init", "--lang", lang, "--template", "filter", "--sdk", root, filter); code != 0 {
				t.Fatalf("init --template filter: code %d\n%s\n%s", code, out, errs)
			}
			shareASCompiler(t, root, lang, filter)
			runMake(t, filter)
			test := runMake(t, filter, "test")
			t.Logf("filter: make test:\n%s", test)
			if code, out, errs := runCLI(t, "validate", filepath.Join(filter, "filter.wasm")); code != 0 {
				t.Fatalf("validate filter: code %d\n%s\n%s", code, out, errs)
			}
			if lang != "go" {
				return // the demo's --input and its counts: once is enough
			}
			code, out, errs = runCLI(t, "demo", "--config", filepath.Join(filter, "config.yaml"), "--lookup-service", "", "--input", filepath.Join(filter, "sample.jsonl"), "--duration", "10s")
			if code != 0 || !strings.Contains(out, "sample.jsonl: 6 record(s) produced") || !strings.Contains(out, "live dashboard: http://127.0.0.1:") ||
				!strings.Contains(out, "[filter] done 6 · outputs 3 · dropped (no output) 1 · retried 0 · dead-lettered 2") {
				t.Fatalf("demo --input: code %d\n%s\n%s", code, out, errs)
			}
		})
	}
}

// shareASCompiler gives an AssemblyScript project the SDK's installed
// compiler (a link to its node_modules) instead of the npm install its
// Makefile would run: the test stays offline and fast.
func shareASCompiler(t *testing.T, root, lang, dir string) {
	t.Helper()
	if lang != "assemblyscript" {
		return
	}
	if err := os.Symlink(filepath.Join(root, "abi", "sdk", "assemblyscript", "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
}

func TestInitRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"init", "--lang", "go", dir}, 1, "is not empty"},
		{[]string{"init", "--lang", "cobol", filepath.Join(dir, "x")}, 1, "want one of go, c, assemblyscript, rust"},
		{[]string{"init", "--lang", "go", "--template", "reduce", filepath.Join(dir, "x")}, 1, "want one of map, filter, enrich, lookup, count"},
		{[]string{"init", filepath.Join(dir, "x")}, 2, "go, c, assemblyscript, rust"},
		{[]string{"init", "--lang", "go", "--sdk", dir, filepath.Join(dir, "y")}, 1, "is not a wasmstream checkout"},
		{[]string{"init", "--lang", "c", "--name", "!!!", filepath.Join(dir, "z")}, 1, "give --name"},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); !bytes.Equal(b, []byte("mine")) {
		t.Fatal("init touched a non-empty directory")
	}
	for _, d := range []string{"x", "y", "z"} {
		if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
			t.Errorf("a refused init created %s", d)
		}
	}
}

// Without --sdk, init finds the checkout it was built in.
func TestInitFindsTheCheckout(t *testing.T) {
	t.Setenv("WASMSTREAM_SDK", "")
	sdk, err := findSDK("")
	if err != nil || sdk != wt.RepoRoot(t) {
		t.Fatalf("%q %v, want %q", sdk, err, wt.RepoRoot(t))
	}
}

// TestInitHintQuotesDir: the "cd DIR" init prints, pasted into a shell,
// enters DIR however it is named (spaces, ";", quotes, command
// substitutions, a leading "-", control characters) and runs nothing else;
// the hint carries no raw control character.
func TestInitHintQuotesDir(t *testing.T) {
	parent := t.TempDir()
	t.Chdir(parent) // DIR is given relative, as a user types it
	for _, tc := range []struct{ dir, shell string }{
		{"my proc; touch PWNED", "sh"},
		{"it's $(touch PWNED) `touch PWNED` \"x\" \\ *", "sh"},
		{"-rf", "sh"},
		{"plain-name_1.0", "sh"},
		{"esc\x1b]0;title\x07 and é", "bash"},
	} {
		code, out, errs := runCLI(t, "init", "--lang", "c", "--name", "proc", "--", tc.dir)
		if code != 0 {
			t.Fatalf("init %q: code %d\n%s\n%s", tc.dir, code, out, errs)
		}
		assertPrintable(t, "init "+tc.dir, out+errs)
		_, hint, ok := strings.Cut(out, "\n  ")
		cd, _, ok2 := strings.Cut(hint, " && make")
		if !ok || !ok2 || !strings.HasPrefix(cd, "cd ") {
			t.Fatalf("init %q: no cd hint in %q", tc.dir, out)
		}
		cmd := exec.Command(tc.shell, "-c", cd+" && pwd")
		cmd.Dir = parent
		got, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != filepath.Join(parent, tc.dir) {
			t.Errorf("%s -c %q: %v, in %q; want %q", tc.shell, cd, err, strings.TrimSpace(string(got)), filepath.Join(parent, tc.dir))
		}
		if _, err := os.Stat(filepath.Join(parent, "PWNED")); err == nil {
			t.Fatalf("%s -c %q ran a command of the directory's name", tc.shell, cd)
		}
	}
}

func TestDemoInputLines(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(f, []byte("{\"a\":1}\r\n\nplain text\n{\"b\":2}"), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := readInputLines(f)
	if err != nil || len(lines) != 3 || string(lines[0]) != `{"a":1}` || string(lines[1]) != "plain text" || string(lines[2]) != `{"b":2}` {
		t.Fatalf("%q %v", lines, err)
	}
	long := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(long, bytes.Repeat([]byte("x"), maxInputLineBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{long: "long.txt: a line longer than", empty: "empty.txt: no records", filepath.Join(dir, "none"): "none: no such file"} {
		if _, err := readInputLines(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
}
