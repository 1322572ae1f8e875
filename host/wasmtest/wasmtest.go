// Package wasmtest assembles small WebAssembly modules for tests, so that
// modules that break the ABI in precise ways need no external toolchain.
package wasmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Value types.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e
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
	Body            []byte
}

// Module is a module to assemble.
type Module struct {
	Imports      []Import
	Funcs        []Func
	MemoryMin    uint32
	NoMemory     bool
	MemoryExport string // default "memory"
}

// Bytes assembles the module.
func (m Module) Bytes() []byte {
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	var types [][]byte
	typeIdx := func(p, r []byte) uint32 {
		t := append([]byte{0x60}, vec(len(p), p)...)
		t = append(t, vec(len(r), r)...)
		for i, have := range types {
			if string(have) == string(t) {
				return uint32(i)
			}
		}
		types = append(types, t)
		return uint32(len(types) - 1)
	}
	var imports, funcs, exports, code []byte
	nExports := 0
	for _, im := range m.Imports {
		imports = append(imports, name(im.Module)...)
		imports = append(imports, name(im.Name)...)
		imports = append(imports, 0x00)
		imports = append(imports, uleb(uint64(typeIdx(im.Params, im.Results)))...)
	}
	for i, f := range m.Funcs {
		funcs = append(funcs, uleb(uint64(typeIdx(f.Params, f.Results)))...)
		body := append([]byte{0x00}, f.Body...) // no locals
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
	var mem []byte
	if !m.NoMemory {
		mem = append([]byte{0x01, 0x00}, uleb(uint64(m.MemoryMin))...)
		en := m.MemoryExport
		if en == "" {
			en = "memory"
		}
		exports = append(exports, name(en)...)
		exports = append(exports, 0x02, 0x00)
		nExports++
	}
	var typeSec []byte
	for _, t := range types {
		typeSec = append(typeSec, t...)
	}
	out = section(out, 1, len(types), typeSec)
	out = section(out, 2, len(m.Imports), imports)
	out = section(out, 3, len(m.Funcs), funcs)
	if mem != nil {
		out = append(out, 5)
		out = append(out, uleb(uint64(len(mem)))...)
		out = append(out, mem...)
	}
	out = section(out, 7, nExports, exports)
	out = section(out, 10, len(m.Funcs), code)
	return out
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
	root := RepoRoot(t)
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+".wasm")
	cmd := exec.Command("go", append(append([]string{"build", "-buildmode=c-shared", "-o", out}, buildFlags...), ".")...)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BuildCGuest builds the C guest source file src (relative to the repository
// root) with clang for wasm32-wasi and returns the module bytes. The test
// command installs clang, lld, wasi-libc and libclang-rt-14-dev-wasm32.
func BuildCGuest(t testing.TB, src string) []byte {
	t.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		t.Fatal("clang not found: C guests need clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 (the test command installs them)")
	}
	out := filepath.Join(t.TempDir(), "guest.wasm")
	cmd := exec.Command("clang", "--target=wasm32-wasi", "-O2", "-mexec-model=reactor", "-o", out, filepath.Join(RepoRoot(t), src))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("clang %s: %v\n%s", src, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
