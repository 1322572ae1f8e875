package main

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/template"
	"unicode"

	"github.com/wasmstream/wasmstream/internal/termsafe"
)

// The project templates of wasmstream init, one directory per language and
// common/ for every language. Every file ends in .tmpl (so that no
// template is taken for part of this module: a go.mod, a Go file), which
// is dropped when it is written.
//
//go:embed inittemplates
var initTemplates embed.FS

var initLangs = []struct{ name, title string }{
	{"go", "Go"}, {"c", "C"}, {"assemblyscript", "AssemblyScript"}, {"rust", "Rust"},
}

func initLangNames() string {
	var s []string
	for _, l := range initLangs {
		s = append(s, l.name)
	}
	return strings.Join(s, ", ")
}

// initData is what the templates see.
type initData struct {
	Name, Crate, Lang, LangName string
	SDK                         string // the wasmstream checkout (absolute)
	GoVersion                   string
	ASSDK, ASImport             string // the AssemblyScript SDK's directory, and its path relative to assembly/
	RustSDK                     string
	CLI                         string // the wasmstream command the Makefile falls back on
	CleanExtra                  string
}

func cmdInit(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lang := fs.String("lang", "", "the processor's language: "+initLangNames())
	sdk := fs.String("sdk", "", "the wasmstream checkout whose SDK the project uses (default: $WASMSTREAM_SDK, else the checkout this binary was built in or runs from)")
	name := fs.String("name", "", "the processor's name (default: DIR's base name)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: wasmstream init --lang LANG [--sdk DIR] [--name NAME] DIR

Creates a processor project in DIR (which must not exist or be empty): the
source of a starter processor (it upper-cases values), a Makefile (make,
make test, make validate, make conformance, make demo), a unit test, a
config.yaml that runs it, and a README. LANG is one of: %s.

The project uses the SDK of a wasmstream checkout (--sdk): Go through a
replace directive in go.mod, Rust through a path dependency,
AssemblyScript through the SDK's build script and installed compiler (run
npm ci in its abi/sdk/assemblyscript once). C needs no SDK.

  wasmstream init --lang rust myproc && cd myproc && make && make test && make validate

Flags:
`, initLangNames())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *lang == "" {
		fs.Usage()
		return 2
	}
	if err := initProject(*lang, *sdk, *name, fs.Arg(0), stdout); err != nil {
		printErr(stderr, "wasmstream init", err)
		return 1
	}
	return 0
}

func initProject(lang, sdk, name, dir string, stdout io.Writer) error {
	d := initData{Lang: strings.ToLower(lang)}
	for _, l := range initLangs {
		if l.name == d.Lang || (d.Lang == "as" && l.name == "assemblyscript") {
			d.Lang, d.LangName = l.name, l.title
		}
	}
	if d.LangName == "" {
		return fmt.Errorf("unknown language %q: want one of %s", lang, initLangNames())
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s is not empty: give a new or empty directory", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if name == "" {
		name = filepath.Base(abs)
	}
	if d.Name, err = projectName(name); err != nil {
		return err
	}
	d.Crate = strings.ReplaceAll(d.Name, "-", "_")
	d.CLI = "wasmstream"
	if d.Lang == "c" {
		if co, err := findSDK(sdk); err == nil { // C needs no SDK; the checkout's CLI is welcome
			d.CLI = filepath.Join(co, "bin", "wasmstream")
		}
	} else {
		if d.SDK, err = findSDK(sdk); err != nil {
			return err
		}
		d.GoVersion = goVersion(filepath.Join(d.SDK, "go.mod"))
		d.ASSDK = filepath.Join(d.SDK, "abi", "sdk", "assemblyscript")
		d.RustSDK = filepath.Join(d.SDK, "abi", "sdk", "rust", "wasmstream")
		rel, err := filepath.Rel(filepath.Join(abs, "assembly"), d.ASSDK)
		if err != nil {
			return err
		}
		d.ASImport = filepath.ToSlash(rel)
		d.CLI = filepath.Join(d.SDK, "bin", "wasmstream")
	}
	switch d.Lang {
	case "c":
		d.CleanExtra = " test_native"
	case "rust":
		d.CleanExtra = "\n\t$(CARGO) clean"
	}
	files, err := renderProject(d)
	if err != nil {
		return err
	}
	if d.Lang == "go" {
		// go.sum: the checkout's, so that the module graph resolves
		// offline from what building wasmstream put in the module cache.
		sum, err := os.ReadFile(filepath.Join(d.SDK, "go.sum"))
		if err != nil {
			return fmt.Errorf("the SDK's go.sum: %w", err)
		}
		files["go.sum"] = sum
	}
	if d.Lang == "c" {
		files["case_ranges.h"] = caseRangesHeader()
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	var names []string
	for n, b := range files {
		p := filepath.Join(abs, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		names = append(names, n)
	}
	fmt.Fprintf(stdout, "created %s: the %s processor %q (%d files)\n", termsafe.Line(dir), d.LangName, d.Name, len(names))
	fmt.Fprintf(stdout, "  cd %s && make && make test && make validate    # then: make demo\n", shellQuote(dir))
	return nil
}

// shellQuote returns s as one word for a POSIX shell, to be pasted: as is
// when it holds only characters no shell treats specially, else in single
// quotes (a quote inside closes them, is escaped and reopens them). A name
// that begins with "-" gets "./" so that cd does not read it as an option.
// A name with a character that is not printable (which the terminal would
// act on) is written with $'...' and \xNN escapes instead (bash, zsh, ksh,
// POSIX.1-2024 sh): the hint never carries a raw control character.
func shellQuote(s string) string {
	if strings.HasPrefix(s, "-") {
		s = "./" + s
	}
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	if termsafe.Line(s) == s {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'', c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// renderProject returns the project's files by path.
func renderProject(d initData) (map[string][]byte, error) {
	common, err := template.New("common").Delims("[[", "]]").ParseFS(initTemplates, "inittemplates/common/targets.tmpl")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	render := func(root string, rename func(string) string) error {
		return fs.WalkDir(initTemplates, root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || path.Base(p) == "targets.tmpl" {
				return err
			}
			src, err := initTemplates.ReadFile(p)
			if err != nil {
				return err
			}
			t, err := common.Clone()
			if err != nil {
				return err
			}
			if t, err = t.New(p).Delims("[[", "]]").Option("missingkey=error").Parse(string(src)); err != nil {
				return err
			}
			var b bytes.Buffer
			if err := t.Execute(&b, d); err != nil {
				return err
			}
			rel := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
			files[rename(rel)] = b.Bytes()
			return nil
		})
	}
	if err := render("inittemplates/"+d.Lang, func(rel string) string {
		if rel == "processor.c" {
			return d.Name + ".c"
		}
		return rel
	}); err != nil {
		return nil, err
	}
	if err := render("inittemplates/common", func(rel string) string {
		if rel == "gitignore" {
			return ".gitignore"
		}
		return rel
	}); err != nil {
		return nil, err
	}
	return files, nil
}

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// projectName makes name a name every toolchain accepts (a Go module
// path, a Rust crate, an npm package, a pipeline name, a file name).
func projectName(name string) (string, error) {
	n := strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return unicode.ToLower(r)
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r == '_' || r == '.' || r == ' ':
			return '-'
		}
		return -1
	}, name)
	n = strings.Trim(n, "-")
	if n != "" && !(n[0] >= 'a' && n[0] <= 'z') {
		n = "proc-" + n
	}
	if !validName.MatchString(n) {
		return "", fmt.Errorf("cannot make a processor name of %q: give --name (letters, digits, '-')", name)
	}
	return n, nil
}

// findSDK returns the wasmstream checkout to use: dir, $WASMSTREAM_SDK,
// the checkout this binary was built in (its source path, when it runs
// where it was built: go run, go test) or the one it sits in (bin/ of a
// checkout, as make build puts it), or the one the working directory is in.
func findSDK(dir string) (string, error) {
	var cands []string
	if dir != "" {
		cands = []string{dir}
	} else if env := os.Getenv("WASMSTREAM_SDK"); env != "" {
		cands = []string{env}
	} else {
		if _, file, _, ok := runtime.Caller(0); ok {
			cands = append(cands, filepath.Join(filepath.Dir(file), "..", ".."))
		}
		if exe, err := os.Executable(); err == nil {
			if exe, err = filepath.EvalSymlinks(exe); err == nil {
				cands = append(cands, filepath.Join(filepath.Dir(exe), ".."))
			}
		}
		if wd, err := os.Getwd(); err == nil {
			for d := wd; ; d = filepath.Dir(d) {
				cands = append(cands, d)
				if filepath.Dir(d) == d {
					break
				}
			}
		}
	}
	for _, c := range cands {
		if isCheckout(c) {
			return filepath.Abs(c)
		}
	}
	if dir != "" || os.Getenv("WASMSTREAM_SDK") != "" {
		return "", fmt.Errorf("%s is not a wasmstream checkout (no go.mod of module github.com/wasmstream/wasmstream with abi/guest)", cands[0])
	}
	return "", errors.New("no wasmstream checkout found for the SDK: give --sdk DIR (or set WASMSTREAM_SDK) to a clone of github.com/wasmstream/wasmstream")
}

func isCheckout(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !bytes.HasPrefix(b, []byte("module github.com/wasmstream/wasmstream\n")) {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, "abi", "guest"))
	return err == nil && st.IsDir()
}

// goVersion is the go directive of the go.mod at p.
func goVersion(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return "1.26"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "1.26"
}

// caseRangesHeader is Go's unicode.CaseRanges as the C table the C
// template upper-cases with (the same as plugins/examples/c-uppercase's
// case_ranges.h, which plugins/examples/c-uppercase/gen writes).
func caseRangesHeader() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by wasmstream init from Go %s's unicode.CaseRanges (Unicode %s). DO NOT EDIT.\n\n", runtime.Version(), unicode.Version)
	fmt.Fprintf(&b, "// lo, hi, upper-case delta per range, sorted; a delta of UPPER_LOWER means\n// the range alternates upper and lower case (upper at even offsets from lo).\n")
	fmt.Fprintf(&b, "#define UPPER_LOWER 0x%x\n", unicode.UpperLower)
	fmt.Fprintf(&b, "#define N_CASE_RANGES %d\n", len(unicode.CaseRanges))
	fmt.Fprintf(&b, "static const int32_t CASE_RANGES[N_CASE_RANGES][3] = {\n")
	for _, r := range unicode.CaseRanges {
		fmt.Fprintf(&b, "\t{0x%x, 0x%x, %d},\n", r.Lo, r.Hi, r.Delta[unicode.UpperCase])
	}
	fmt.Fprintf(&b, "};\n")
	return b.Bytes()
}
