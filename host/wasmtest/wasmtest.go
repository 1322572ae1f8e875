// Package wasmtest assembles small WebAssembly modules for tests, so that
// modules that break the ABI in precise ways need no external toolchain.
package wasmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Value types.
const (
	I32     byte = 0x7f
	I64     byte = 0x7e
	V128    byte = 0x7b
	FuncRef byte = 0x70
)

// Instructions used by tests.
var (
	Unreachable = []byte{0x00}
	Drop        = []byte{0x1a}
)

// I32Const is the instruction i32.const v.
func I32Const(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }

// LocalGet is local.get i.
func LocalGet(i uint32) []byte { return append([]byte{0x20}, uleb(uint64(i))...) }

// Call is call f (function index: imports first, then defined functions).
func Call(f uint32) []byte { return append([]byte{0x10}, uleb(uint64(f))...) }

// RefNullFunc is ref.null func.
var RefNullFunc = []byte{0xd0, FuncRef}

// TableGrow is table.grow t: it pops a reference and a count and pushes the
// table's previous size, or -1.
func TableGrow(t uint32) []byte { return append([]byte{0xfc, 15}, uleb(uint64(t))...) }

// TableSize is table.size t.
func TableSize(t uint32) []byte { return append([]byte{0xfc, 16}, uleb(uint64(t))...) }

// GrowTable is the instructions of table.grow t by n null references,
// leaving the result (previous size or -1) on the stack.
func GrowTable(t uint32, n int32) []byte {
	b := append([]byte{}, RefNullFunc...)
	b = append(b, I32Const(n)...)
	return append(b, TableGrow(t)...)
}

// Loop is an infinite loop: loop br 0 end.
var Loop = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}

// Import is an imported function.
type Import struct {
	Module, Name    string
	Params, Results []byte
}

// Func is a defined function; Body is its instructions without the final end.
type Func struct {
	Export          string
	Params, Results []byte
	Locals          []Locals
	Body            []byte
}

// Locals declares N locals of Type.
type Locals struct {
	N    uint32
	Type byte
}

// Table is a funcref table.
type Table struct {
	Min, Max uint32
	HasMax   bool
}

// Module is a module to assemble.
type Module struct {
	Imports      []Import
	Funcs        []Func
	MemoryMin    uint32
	NoMemory     bool
	MemoryExport string // default "memory"
	Tables       []Table
	// Globals defines that many immutable i32 globals (value 0).
	Globals int
	// Start names the defined function (index in Funcs) of a start
	// section, when HasStart.
	Start    uint32
	HasStart bool
	// Elements are passive element segments of that many references to
	// the first function each.
	Elements []int
	// Data are passive data segments.
	Data [][]byte
}

// Bytes assembles the module.
func (m Module) Bytes() []byte {
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	var types typeTable
	imports := m.importEntries(&types)
	funcs, code, exports, nExports := m.funcEntries(&types)
	mem, exports, nExports := m.memoryEntry(exports, nExports)
	out = section(out, 1, len(types), types.entries())
	out = section(out, 2, len(m.Imports), imports)
	out = section(out, 3, len(m.Funcs), funcs)
	out = section(out, 4, len(m.Tables), m.tableEntries())
	if mem != nil {
		out = append(out, 5)
		out = append(out, uleb(uint64(len(mem)))...)
		out = append(out, mem...)
	}
	globals := make([]byte, 0, 5*m.Globals)
	for i := 0; i < m.Globals; i++ {
		globals = append(globals, I32, 0x00, 0x41, 0x00, 0x0b) // i32 const, i32.const 0 end
	}
	out = section(out, 6, m.Globals, globals)
	out = section(out, 7, nExports, exports)
	if m.HasStart {
		out = append(out, 8)
		s := uleb(uint64(len(m.Imports)) + uint64(m.Start))
		out = append(append(out, uleb(uint64(len(s)))...), s...)
	}
	out = section(out, 9, len(m.Elements), m.elementEntries())
	if len(m.Data) > 0 {
		dc := uleb(uint64(len(m.Data))) // data count section
		out = append(append(append(out, 12), uleb(uint64(len(dc)))...), dc...)
	}
	out = section(out, 10, len(m.Funcs), code)
	var data []byte
	for _, d := range m.Data {
		data = append(data, 0x01) // passive
		data = append(append(data, uleb(uint64(len(d)))...), d...)
	}
	return section(out, 11, len(m.Data), data)
}

// typeTable is a module's function types, each once, in the order first
// used.
type typeTable [][]byte

// index returns the index of the function type of params p and results r,
// adding it when new.
func (ts *typeTable) index(p, r []byte) uint32 {
	t := append([]byte{0x60}, vec(len(p), p)...)
	t = append(t, vec(len(r), r)...)
	for i, have := range *ts {
		if string(have) == string(t) {
			return uint32(i)
		}
	}
	*ts = append(*ts, t)
	return uint32(len(*ts) - 1)
}

// entries is the type section's entries.
func (ts typeTable) entries() []byte {
	var b []byte
	for _, t := range ts {
		b = append(b, t...)
	}
	return b
}

// importEntries is the import section's entries, their types added to
// types.
func (m Module) importEntries(types *typeTable) []byte {
	var imports []byte
	for _, im := range m.Imports {
		imports = append(imports, name(im.Module)...)
		imports = append(imports, name(im.Name)...)
		imports = append(imports, 0x00)
		imports = append(imports, uleb(uint64(types.index(im.Params, im.Results)))...)
	}
	return imports
}

// funcEntries is the function and code sections' entries and the
// functions' exports, their types added to types.
func (m Module) funcEntries(types *typeTable) (funcs, code, exports []byte, nExports int) {
	for i, f := range m.Funcs {
		funcs = append(funcs, uleb(uint64(types.index(f.Params, f.Results)))...)
		body := uleb(uint64(len(f.Locals)))
		for _, l := range f.Locals {
			body = append(append(body, uleb(uint64(l.N))...), l.Type)
		}
		body = append(body, f.Body...)
		body = append(body, 0x0b)
		code = append(code, uleb(uint64(len(body)))...)
		code = append(code, body...)
		if f.Export != "" {
			exports = append(exports, name(f.Export)...)
			exports = append(exports, 0x00)
			exports = append(exports, uleb(uint64(len(m.Imports)+i))...)
			nExports++
		}
	}
	return funcs, code, exports, nExports
}

// memoryEntry is the memory section's entry, nil for none, and the exports
// with the memory's added.
func (m Module) memoryEntry(exports []byte, nExports int) ([]byte, []byte, int) {
	if m.NoMemory {
		return nil, exports, nExports
	}
	mem := append([]byte{0x01, 0x00}, uleb(uint64(m.MemoryMin))...)
	en := m.MemoryExport
	if en == "" {
		en = "memory"
	}
	exports = append(exports, name(en)...)
	exports = append(exports, 0x02, 0x00)
	return mem, exports, nExports + 1
}

// tableEntries is the table section's entries.
func (m Module) tableEntries() []byte {
	var tables []byte
	for _, t := range m.Tables {
		tables = append(tables, FuncRef)
		if t.HasMax {
			tables = append(append(append(tables, 0x01), uleb(uint64(t.Min))...), uleb(uint64(t.Max))...)
		} else {
			tables = append(append(tables, 0x00), uleb(uint64(t.Min))...)
		}
	}
	return tables
}

// elementEntries is the element section's entries: passive segments of
// references to the first function.
func (m Module) elementEntries() []byte {
	var elems []byte
	for _, n := range m.Elements {
		elems = append(elems, 0x01, 0x00) // passive, elemkind funcref
		elems = append(elems, uleb(uint64(n))...)
		first := uleb(uint64(len(m.Imports)))
		for i := 0; i < n; i++ {
			elems = append(elems, first...)
		}
	}
	return elems
}

func section(out []byte, id byte, n int, body []byte) []byte {
	if n == 0 {
		return out
	}
	c := append(uleb(uint64(n)), body...)
	out = append(out, id)
	out = append(out, uleb(uint64(len(c)))...)
	return append(out, c...)
}

func vec(n int, b []byte) []byte { return append(uleb(uint64(n)), b...) }

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Minimal returns a module that satisfies ABI v1 and whose on_record body is
// given (it must leave one i32 status on the stack).
func Minimal(onRecord []byte, imports ...Import) Module {
	return Module{
		Imports:   imports,
		MemoryMin: 1,
		Funcs: []Func{
			{Export: "wasmstream_abi_version", Results: []byte{I32}, Body: I32Const(1)},
			{Export: "wasmstream_on_record", Params: []byte{I32, I32}, Results: []byte{I32}, Body: onRecord},
		},
	}
}

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above " + file)
		}
		dir = parent
	}
}

// BuildGoGuest builds the Go guest in dir (relative to the repository root)
// with the standard toolchain (and buildFlags, e.g. -ldflags) and returns
// the module bytes.
func BuildGoGuest(t testing.TB, dir string, buildFlags ...string) []byte {
	t.Helper()
	return built(t, "go\x00"+dir+"\x00"+strings.Join(buildFlags, "\x00"), func() []byte { return buildGoGuest(t, dir, buildFlags...) })
}

func buildGoGuest(t testing.TB, dir string, buildFlags ...string) []byte {
	t.Helper()
	root := RepoRoot(t)
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+".wasm")
	cmd := exec.Command("go", append(append([]string{"build", "-buildmode=c-shared", "-o", out}, buildFlags...), ".")...)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	return buildModule(t, cmd, "build "+dir, out)
}

// BuildWat assembles the WebAssembly text file src (relative to the
// repository root) with wat2wasm (wabt; the test command installs it) and
// returns the module bytes.
func BuildWat(t testing.TB, src string) []byte {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Fatal("wat2wasm not found: hand-written test modules need wabt (the test command installs it)")
	}
	out := filepath.Join(t.TempDir(), "module.wasm")
	cmd := exec.Command("wat2wasm", "--debug-names", "-o", out, filepath.Join(RepoRoot(t), src))
	return buildModule(t, cmd, "wat2wasm "+src, out)
}

// BuildCGuest builds the C guest source file src (relative to the repository
// root) with clang for wasm32-wasi and returns the module bytes. The test
// command installs clang, lld, wasi-libc and libclang-rt-14-dev-wasm32.
func BuildCGuest(t testing.TB, src string) []byte {
	t.Helper()
	return built(t, "c\x00"+src, func() []byte { return buildCGuest(t, src) })
}

func buildCGuest(t testing.TB, src string) []byte {
	t.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatal("clang not found: C guests need clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 (the test command installs them)")
	}
	out := filepath.Join(t.TempDir(), "guest.wasm")
	cmd := exec.Command("clang", "--target=wasm32-wasi", "-O2", "-mexec-model=reactor", "-o", out, filepath.Join(RepoRoot(t), src))
	return buildModule(t, cmd, "clang "+src, out)
}

// asSDK is the AssemblyScript SDK's directory, relative to the repository root.
const asSDK = "abi/sdk/assemblyscript"

var (
	asInstall    sync.Once
	asInstallErr error
)

// InstallASSDK installs the AssemblyScript SDK's pinned compiler (npm ci
// from package-lock.json, once per test binary, when node_modules is not
// current; the npm cache in ~/.npm lets it run offline) and returns the
// SDK's directory. It needs node and npm (the test command installs them).
func InstallASSDK(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: AssemblyScript guests need node and npm (the test command installs them)", tool)
		}
	}
	sdk := filepath.Join(RepoRoot(t), asSDK)
	asInstall.Do(func() {
		// node_modules/.package-lock.json is npm's record of the install:
		// newer than the lockfile, the install is current.
		lock, err1 := os.Stat(filepath.Join(sdk, "package-lock.json"))
		inst, err2 := os.Stat(filepath.Join(sdk, "node_modules", ".package-lock.json"))
		if err1 == nil && err2 == nil && !inst.ModTime().Before(lock.ModTime()) {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
		cmd.Dir = sdk
		if b, err := cmd.CombinedOutput(); err != nil {
			asInstallErr = fmt.Errorf("npm ci in %s: %v\n%s", asSDK, err, b)
		}
	})
	if asInstallErr != nil {
		t.Fatal(asInstallErr)
	}
	return sdk
}

// BuildASGuest builds the AssemblyScript guest whose entry file is entry
// (relative to the repository root) with the SDK's build script
// (abi/sdk/assemblyscript/build.mjs: asc -O3, incremental runtime, the SDK's
// abort function) and returns the module bytes. It installs the SDK's pinned
// compiler first (npm ci from package-lock.json, once per test binary; the
// npm cache in ~/.npm lets it run offline). It needs node and npm (the test
// command installs them).
func BuildASGuest(t testing.TB, entry string) []byte {
	t.Helper()
	return built(t, "as\x00"+entry, func() []byte { return buildASGuest(t, entry) })
}

func buildASGuest(t testing.TB, entry string) []byte {
	t.Helper()
	root := RepoRoot(t)
	sdk := InstallASSDK(t)
	out := filepath.Join(t.TempDir(), "guest.wasm")
	cmd := exec.Command("node", filepath.Join(sdk, "build.mjs"), filepath.Join(root, entry), out)
	return buildModule(t, cmd, "build "+entry, out)
}

// builds holds the modules this test binary built, by what was built: a
// guest is built once per test binary however many tests take it (each
// gets its own copy of the bytes). A failed build is not kept.
var builds sync.Map // string -> []byte

// built returns the module key names, building it with build the first time.
func built(t testing.TB, key string, build func() []byte) []byte {
	t.Helper()
	if b, ok := builds.Load(key); ok {
		return bytes.Clone(b.([]byte))
	}
	b := build()
	if t.Failed() || b == nil {
		return b
	}
	builds.Store(key, bytes.Clone(b))
	return b
}

// buildModule runs cmd, a build writing a module to out, and returns the
// module's bytes; what names the build when it fails.
func buildModule(t testing.TB, cmd *exec.Cmd, what, out string) []byte {
	t.Helper()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BuildRustGuest builds the Rust guest crate in dir (relative to the
// repository root) with cargo, in release mode, and returns the module bytes
// (target/<target>/release/<crate name>.wasm, the crate being named after
// its directory). env is added to cargo's environment (e.g.
// PROCESSOR_VERSION=2). The toolchain and target are those
// abi/sdk/rust/wasm-target.sh finds, as the Makefile's: rustup's with
// wasm32-wasip1, else Debian's rustc with wasm32-wasi (the test command
// installs it).
func BuildRustGuest(t testing.TB, dir string, env ...string) []byte {
	t.Helper()
	bin, target := RustToolchain(t)
	cmd := exec.Command(filepath.Join(bin, "cargo"), "build", "--release", "--target", target, "--quiet")
	cmd.Dir = filepath.Join(RepoRoot(t), dir)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	out := filepath.Join(cmd.Dir, "target")
	if len(env) > 0 {
		// A build with its own environment in its own directory, so that
		// it and the plain build do not rebuild each other.
		out = filepath.Join(out, "env-"+strings.NewReplacer("=", "-", "/", "-", " ", "-").Replace(strings.Join(env, "_")))
		cmd.Env = append(cmd.Env, "CARGO_TARGET_DIR="+out)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cargo build %s for %s: %v\n%s", dir, target, err, b)
	}
	name := strings.ReplaceAll(filepath.Base(dir), "-", "_") + ".wasm"
	b, err := os.ReadFile(filepath.Join(out, target, "release", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RustToolchain returns the directory of the cargo and rustc that build
// Rust guests and their WASI target, as abi/sdk/rust/wasm-target.sh finds
// them; the test fails with the script's explanation when there is none.
func RustToolchain(t testing.TB) (bin, target string) {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(RepoRoot(t), "abi", "sdk", "rust", "wasm-target.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 2 {
		t.Fatalf("no Rust toolchain for WebAssembly: %v\n%s", err, stderr.String())
	}
	return f[0], f[1]
}
