package host

import (
	"context"
	"os"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// Each test below is an attack on the host's memory through something a
// module declares or grows, sized well past what the host should spend (a
// gigabyte or more unless bounded). Each asserts the outcome (refused at
// load naming the bound, or the grow failing inside the guest) and that the
// Go heap allocated little meanwhile: allocation is measured, not resident
// memory, because a huge untouched allocation may not be resident yet and
// still kill a host under an address-space limit.

// allocated reports the bytes the Go heap allocated during f.
func allocated(t *testing.T, f func()) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	d := s[0].Value.Uint64() - before
	t.Logf("allocated %d MiB; %s", d>>20, vmRSS())
	return d
}

func vmRSS() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "VmHWM:") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return ""
}

const maxAttackAlloc = 64 << 20 // what a refused or contained attack may cost

// loadErr loads wasm with default limits and returns the error.
func loadErr(t *testing.T, wasm []byte) error {
	t.Helper()
	m, err := newEngine(t).Load(context.Background(), wasm, ModuleConfig{Name: "attack"})
	if err == nil {
		m.Close(context.Background())
	}
	return err
}

// refused asserts that loading wasm fails, naming want, and costs little.
func refused(t *testing.T, wasm []byte, want string) {
	t.Helper()
	var err error
	if d := allocated(t, func() { err = loadErr(t, wasm) }); d > maxAttackAlloc {
		t.Errorf("loading allocated %d MiB (bound %d MiB)", d>>20, maxAttackAlloc>>20)
	}
	if err == nil {
		t.Fatalf("module accepted; want refused naming %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
	t.Log(err)
}

func TestBoundDeclaredTables(t *testing.T) {
	m := wt.Minimal(wt.I32Const(0))
	m.Tables = []wt.Table{{Min: 1 << 27}} // 1 GiB of references per instance
	refused(t, m.Bytes(), "limits.table_elements")

	m.Tables = make([]wt.Table, 17)
	refused(t, m.Bytes(), "host.MaxTables")
}

// growStatus is an on_record body: table.grow(0, n) and status fail (3)
// when it returned -1, ok (0) otherwise.
func growStatus(n int32) []byte {
	b := wt.GrowTable(0, n)
	b = append(b, wt.I32Const(-1)...)
	b = append(b, 0x46) // i32.eq
	b = append(b, wt.I32Const(3)...)
	return append(b, 0x6c) // i32.mul
}

func TestBoundGrownTable(t *testing.T) {
	m := wt.Minimal(growStatus(1 << 27)) // 1 GiB of references
	m.Tables = []wt.Table{{Min: 1}}
	mod := load(t, m.Bytes(), Limits{})
	in := newInstance(t, mod)
	var res Result
	d := allocated(t, func() { res = in.Process(context.Background(), &abi.Record{Topic: "in", Attempt: 1}, nil) })
	if res.Fault() != nil || res.Status != abi.StatusFail {
		t.Fatalf("table.grow by 2^27: status %v, err %v; want fail (table.grow returned -1)", res.Status, res.Err)
	}
	if d > maxAttackAlloc {
		t.Fatalf("table.grow allocated %d MiB", d>>20)
	}
	// A grow within limits.table_elements succeeds on the same instance.
	m = wt.Minimal(growStatus(1000))
	m.Tables = []wt.Table{{Min: 1}}
	in = newInstance(t, load(t, m.Bytes(), Limits{}))
	if res := in.Process(context.Background(), &abi.Record{Topic: "in", Attempt: 1}, nil); res.Err != nil || res.Status != abi.StatusOK {
		t.Fatalf("table.grow by 1000: status %v, err %v; want ok", res.Status, res.Err)
	}
}

// A module whose initialiser grows its table without bound fails to grow,
// traps, and is refused at load, not by the process dying.
func TestBoundGrownTableInInitialize(t *testing.T) {
	init := wt.GrowTable(0, 1<<27)
	init = append(init, wt.I32Const(-1)...)
	init = append(init, 0x46, 0x04, 0x40) // i32.eq if
	init = append(init, wt.Unreachable...)
	init = append(init, 0x0b) // end
	m := wt.Minimal(wt.I32Const(0))
	m.Tables = []wt.Table{{Min: 1}}
	m.Funcs = append(m.Funcs, wt.Func{Export: abi.ExportInitialize, Body: init})
	refused(t, m.Bytes(), "unreachable")
}

func TestBoundGlobals(t *testing.T) {
	m := wt.Minimal(wt.I32Const(0))
	m.Globals = 2_000_000
	refused(t, m.Bytes(), "host.MaxGlobals")
}

func TestBoundFunctions(t *testing.T) {
	m := wt.Minimal(wt.I32Const(0))
	for len(m.Funcs) <= 1_000_000 {
		m.Funcs = append(m.Funcs, wt.Func{})
	}
	refused(t, m.Bytes(), "host.MaxFunctions")
}

func TestBoundElementSegments(t *testing.T) {
	m := wt.Minimal(wt.I32Const(0))
	m.Tables = []wt.Table{{Min: 1}}
	m.Elements = []int{4 << 20} // 32 MiB per instance, more to decode
	refused(t, m.Bytes(), "limits.table_elements")
}

func TestBoundDataSegment(t *testing.T) {
	// A passive data segment declaring 4 GiB - 1 bytes it does not hold:
	// wazero would allocate the 4 GiB before finding the bytes missing.
	b := wt.Minimal(wt.I32Const(0)).Bytes()
	b = append(b, 11, 7, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f)
	refused(t, b, "4294967295 bytes declared")
	m := wt.Minimal(wt.I32Const(0))
	m.Data = [][]byte{make([]byte, 1<<20), make([]byte, 1<<20)}
	if err := loadErr(t, m.Bytes()); err != nil {
		t.Fatalf("data segments of 1 MiB refused: %v", err)
	}
}

func TestBoundLocals(t *testing.T) {
	m := wt.Minimal(wt.I32Const(0))
	m.Funcs = append(m.Funcs, wt.Func{Locals: []wt.Locals{{N: 1 << 30, Type: wt.I32}}}) // 1 GiB to decode
	refused(t, m.Bytes(), "host.MaxLocals")

	m = wt.Minimal(wt.I32Const(0))
	m.Funcs = append(m.Funcs, wt.Func{Locals: []wt.Locals{{N: 40_000, Type: wt.V128}}})
	if err := loadErr(t, m.Bytes()); err != nil {
		t.Fatalf("40,000 locals refused: %v", err)
	}
}

func TestBoundModuleSize(t *testing.T) {
	b := wt.Minimal(wt.I32Const(0)).Bytes()
	pad := make([]byte, 65<<20) // a custom section
	b = append(b, 0)
	n := len(pad) + 2
	b = append(b, byte(n&0x7f|0x80), byte(n>>7&0x7f|0x80), byte(n>>14&0x7f|0x80), byte(n>>21&0x7f))
	b = append(b, 1, 'x')
	b = append(b, pad...)
	refused(t, b, "host.MaxModuleBytes")
}
