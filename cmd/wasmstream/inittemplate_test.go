package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// templateKit creates, builds and tests projects of one `wasmstream init`
// template with the wasmstream command of this source: a project's make
// runs it (a stale bin/wasmstream lacks what is not committed yet). Safe
// for parallel subtests: its fields are set once.
type templateKit struct {
	template string
	root     string // the repository: the SDKs the projects copy
	bin      string // this source's wasmstream command
}

// newTemplateKit requires make and builds the command once for the test.
func newTemplateKit(t *testing.T, template string) *templateKit {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make not found (the test command installs it)")
	}
	k := &templateKit{template: template, root: wt.RepoRoot(t), bin: filepath.Join(t.TempDir(), "wasmstream")}
	build := exec.Command("go", "build", "-o", k.bin, "./cmd/wasmstream")
	build.Dir = k.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/wasmstream: %v\n%s", err, out)
	}
	return k
}

// initAndTest creates the project in dir (lang "" for init's default),
// requires init's output to hold created, builds the project with its
// Makefile and returns the output of its make test.
func (k *templateKit) initAndTest(t *testing.T, lang, dir, created string) string {
	t.Helper()
	args := []string{"init", "--template", k.template, "--sdk", k.root, dir}
	if lang != "" {
		args = append([]string{"init", "--lang", lang}, args[1:]...)
	}
	if code, out, errs := runCLI(t, args...); code != 0 || !strings.Contains(out, created) {
		t.Fatalf("%s: code %d\n%s\n%s", strings.Join(args[:len(args)-3], " "), code, out, errs)
	}
	runMake(t, dir)
	return k.make(t, dir, "test")
}

// make runs a target of the project's Makefile with this source's command.
func (k *templateKit) make(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return runMake(t, dir, append(args, "WASMSTREAM="+k.bin)...)
}

// refusesLang requires init to refuse the template in lang (its name as
// init's error spells it, e.g. "Rust").
func (k *templateKit) refusesLang(t *testing.T, lang, name string) {
	t.Helper()
	code, _, errs := runCLI(t, "init", "--lang", lang, "--template", k.template, "--sdk", k.root, filepath.Join(t.TempDir(), lang))
	if want := "the template " + k.template + " has no " + name + " version"; code != 1 || !strings.Contains(errs, want) {
		t.Errorf("init --lang %s --template %s: code %d, want 1 and %q\n%s", lang, k.template, code, want, errs)
	}
}
