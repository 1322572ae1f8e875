package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
	// The checkout's command (make build), built from the tree the
	// project's SDK is copied from: .wasmstream-version's commit lacks
	// what is not committed yet.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "GOPROXY=off", "CARGO_NET_OFFLINE=true", "WASMSTREAM="+filepath.Join(wt.RepoRoot(t), "bin", "wasmstream"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// TestInitEveryLanguage, in each language:
//
// The default template (map): a project created, moved (the SDK is
// vendored: it must build away from where it was made), built with its
// Makefile, its make test run (the unit test where the language has one,
// wasmstream test on vectors.jsonl, the ABI checks), the module validated
// and checked with the conformance kit (the starter is an uppercase
// processor); in C, also run in the demo with the project's config.yaml.
//
// A new user's flow: init --template filter, the processor's body replaced
// the way a user edits it (records with an "amount" under 10 dropped, those
// without one dead-lettered with the user's own message), the user's records
// added to vectors.jsonl (one expects that message: the edit is what runs),
// make and make test, wasmstream demo --input on a file of the user's
// records (the kept one output, the dead-lettered one shown, the summary's
// counts), then the project moved and built again.
//
// The other templates (enrich, lookup, count): created, built, make test;
// in C, count also runs in the demo (state on topics the demo creates).
//
// Each step's time is logged. The toolchains are those the test command
// installs (Go, clang and wasi-libc, node and the AssemblyScript SDK's
// compiler, Rust as abi/sdk/rust/wasm-target.sh finds it); a missing one
// fails the test.
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
	t.Cleanup(func() { e.Close(context.Background()) }) // after the parallel subtests
	// The languages run side by side: each is mostly one compiler at a
	// time, on a machine with two cores (the test took 170-210 s in turn).
	for _, lang := range []string{"go", "c", "assemblyscript", "rust"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			step := func(what string, f func()) {
				t.Helper()
				start := time.Now()
				f()
				t.Logf("%-40s %6.1fs", what, time.Since(start).Seconds())
			}
			made := filepath.Join(t.TempDir(), "My_Proc."+lang)
			name := "my-proc-" + lang
			dir := filepath.Join(t.TempDir(), "moved")
			step("map: init, move", func() {
				code, out, errs := runCLI(t, "init", "--lang", lang, "--sdk", root, made)
				if code != 0 || !strings.Contains(out, "created") {
					t.Fatalf("init: code %d\n%s\n%s", code, out, errs)
				}
				for _, f := range []string{"Makefile", "config.yaml", "README.md", ".gitignore", ".github/workflows/ci.yml"} {
					if _, err := os.Stat(filepath.Join(made, f)); err != nil {
						t.Fatalf("no %s: %v", f, err)
					}
				}
				if err := os.Rename(made, dir); err != nil {
					t.Fatal(err)
				}
				shareASCompiler(t, root, lang, dir)
			})
			step("map: make", func() { runMake(t, dir) })
			step("map: make test", func() { runMake(t, dir, "test") })
			wasm := filepath.Join(dir, name+".wasm")
			step("map: validate, conformance uppercase", func() {
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
					t.Fatalf("the starter does not conform:\n%s", rep)
				}
			})
			if lang == "c" { // the demo with the project's config and generated input: once is enough (conformance ran the module in every language)
				step("map: demo", func() {
					code, out, errs := runCLI(t, "demo", "--config", filepath.Join(dir, "config.yaml"), "--lookup-service", "", "--duration", "10s", "--rate", "20")
					if code != 0 || !strings.Contains(out, "← "+name+"-out") || !strings.Contains(out, "HELLO FROM WASMSTREAM") {
						t.Fatalf("demo: code %d\n%s\n%s", code, out, errs)
					}
				})
			}

			userFilterFlow(t, root, lang, step)

			for _, tmpl := range []string{"enrich", "lookup", "count"} {
				p := filepath.Join(t.TempDir(), tmpl)
				step(tmpl+": init, make", func() {
					if code, out, errs := runCLI(t, "init", "--lang", lang, "--template", tmpl, "--sdk", root, p); code != 0 {
						t.Fatalf("init --template %s: code %d\n%s\n%s", tmpl, code, out, errs)
					}
					shareASCompiler(t, root, lang, p)
					runMake(t, p)
				})
				step(tmpl+": make test", func() {
					out := runMake(t, p, "test")
					if !strings.Contains(out, "expectations: ") || strings.Contains(out, "expect: FAIL") || !abiAllPassed(out) {
						t.Fatalf("%s: make test:\n%s", tmpl, out)
					}
				})
				if lang == "c" && tmpl == "count" { // a stateful pipeline on topics the demo creates: once is enough
					step("count: demo", func() {
						code, out, errs := runCLI(t, "demo", "--config", filepath.Join(p, "config.yaml"), "--lookup-service", "", "--duration", "8s", "--rate", "20")
						if code != 0 || !strings.Contains(out, "← count-out") || !strings.Contains(out, `{"count":2}`) || strings.Contains(out, "✗") {
							t.Fatalf("demo of count: code %d\n%s\n%s", code, out, errs)
						}
					})
				}
			}
		})
	}
}

// userEdits are the filter processor's body as a user rewrites it, in each
// language: an "amount" under 10 dropped, a record without a numeric one
// dead-lettered with the message "amount missing" (the template's says
// something else), the others kept. Each replaces the generated source from
// the first line that starts with its prefix to the function's closing
// brace.
var userEdits = map[string]struct{ file, prefix, body string }{
	"go": {"main.go", "func process(", `func process(r *guest.Record, out guest.Emitter) error {
	var v struct {
		Amount *float64 ` + "`json:\"amount\"`" + `
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return guest.Terminal(fmt.Errorf("amount missing: not JSON: %w", err))
	}
	if v.Amount == nil {
		return guest.Terminal(errors.New("amount missing"))
	}
	if *v.Amount < 10 {
		return nil
	}
	return out.Emit(guest.Output{Key: r.Key, Value: r.Value, Headers: r.Headers})
}
`},
	"rust": {"src/lib.rs", "pub fn process(", `pub fn process(r: &Record, out: &mut Emitter) -> Result<(), Error> {
    match json::number(r.value.unwrap_or_default(), "amount") {
        Ok(Some(a)) if a < 10.0 => Ok(()),
        Ok(Some(_)) => {
            out.emit(&Output { key: r.key, value: r.value, headers: r.headers.into(), ..Output::default() })?;
            Ok(())
        }
        _ => Err(Error::terminal("amount missing")),
    }
}
`},
	"assemblyscript": {"assembly/index.ts", "function process(", `function process(r: Record, out: Emitter): Outcome {
  const amount = jsonField(r.value, "amount");
  if (amount.error !== null || !amount.found || !amount.isNumber()) return fail("amount missing");
  if (amount.asNumber() < 10) return ok();
  return out.emit(new Output(r.key, r.value, r.headers));
}
`},
	"c": {"filter.c", `WS_EXPORT("wasmstream_on_record")`, `WS_EXPORT("wasmstream_on_record") int32_t on_record(uint32_t handle, uint32_t len) {
	ws_record r;
	int32_t st = ws_read_record(handle, len, &r);
	if (st) return st;
	ws_bytes amount;
	double a;
	if (ws_json_field(r.value, "amount", &amount) != 1 || !ws_json_number(amount, &a)) return ws_error(handle, WS_FAIL, "amount missing");
	if (a < 10) return WS_OK;
	st = ws_emit(handle, r.key, r.value, r.headers, r.headers_len);
	return st ? st : WS_OK;
}
`},
}

// userVectors are the records the user adds to vectors.jsonl with the edit.
const userVectors = `{"name": "mine: 9.5 is dropped", "key": "u1", "value": {"amount": 9.5, "note": "small"}, "expect": {"outcome": "drop"}}
{"name": "mine: 12 is kept", "key": "u2", "value": {"amount": 12}, "expect": {"outcome": "ok", "outputs": [{"key": "u2", "value": {"amount": 12}}]}}
{"name": "mine: no amount, dead-lettered with my message", "key": "u3", "value": {"note": "none"}, "expect": {"outcome": "fail", "error": "amount missing"}}
`

// userFilterFlow is a new user's path through the filter template in lang
// (TestInitEveryLanguage).
func userFilterFlow(t *testing.T, root, lang string, step func(string, func())) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "filter")
	step("filter: init, edit, add vectors", func() {
		if code, out, errs := runCLI(t, "init", "--lang", lang, "--template", "filter", "--sdk", root, dir); code != 0 {
			t.Fatalf("init --template filter: code %d\n%s\n%s", code, out, errs)
		}
		shareASCompiler(t, root, lang, dir)
		ed := userEdits[lang]
		src := filepath.Join(dir, filepath.FromSlash(ed.file))
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i := strings.Index(s, "\n"+ed.prefix)
		j := strings.Index(s[i+1:], "\n}\n")
		if i < 0 || j < 0 {
			t.Fatalf("%s: no function starting %q to edit:\n%s", ed.file, ed.prefix, s)
		}
		s = s[:i+1] + ed.body + s[i+1+j+3:]
		if err := os.WriteFile(src, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(dir, "vectors.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(userVectors); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
	step("filter: make", func() { runMake(t, dir) })
	step("filter: make test", func() {
		out := runMake(t, dir, "test")
		if !strings.Contains(out, "mine: no amount, dead-lettered with my message") || !strings.Contains(out, "expectations: 8 passed, 0 failed") ||
			!abiAllPassed(out) {
			t.Fatalf("make test: the user's vectors not run or failing:\n%s", out)
		}
	})
	step("filter: demo --input", func() {
		in := writeFile(t, t.TempDir(), "mine.jsonl", []byte("{\"order\":\"kept-1\",\"amount\":50}\n{\"order\":\"small-2\",\"amount\":2}\n{\"order\":\"none-3\"}\n"))
		code, out, errs := runCLI(t, "demo", "--config", filepath.Join(dir, "config.yaml"), "--lookup-service", "", "--input", in, "--duration", "10s")
		if code != 0 || !strings.Contains(out, "mine.jsonl: 3 record(s) produced") || !strings.Contains(out, "live dashboard: http://127.0.0.1:") ||
			!strings.Contains(out, "← filter-out") || !strings.Contains(out, `{"order":"kept-1","amount":50}`) ||
			!strings.Contains(out, "✗ filter.dlq") || !strings.Contains(out, "amount missing") ||
			!strings.Contains(out, "[filter] done 3 · outputs 1 · dropped (no output) 1 · retried 0 · dead-lettered 1") {
			t.Fatalf("demo --input: code %d\n%s\n%s", code, out, errs)
		}
	})
	step("filter: move, make again", func() {
		moved := filepath.Join(t.TempDir(), "moved-filter")
		if err := os.Rename(dir, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(moved, "filter.wasm")); err != nil {
			t.Fatal(err)
		}
		runMake(t, moved)
		// Built (make test validated the same source; validating here again,
		// in this -race process, would cost a Go module ~25 s).
		if st, err := os.Stat(filepath.Join(moved, "filter.wasm")); err != nil || st.Size() == 0 {
			t.Fatalf("the moved filter built no module: %v", err)
		}
	})
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

// abiAllPassed: the ABI checks' summary line says every check passed
// (their number grows with the ABI).
func abiAllPassed(out string) bool {
	m := regexp.MustCompile(`abi: (\d+) of (\d+) checks passed`).FindStringSubmatch(out)
	return m != nil && m[1] == m[2]
}
