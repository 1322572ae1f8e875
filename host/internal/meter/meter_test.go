package meter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmstream/wasmstream/host/internal/meter"
	"github.com/wasmstream/wasmstream/host/internal/wasmbin"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

func features(t testing.TB) []byte {
	return wt.BuildWat(t, "host/internal/meter/testdata/features.wat")
}

// run instantiates wasm (instrumented or not) and calls each export named
// in names, returning "result" or "trap: msg" per export. Imports: env.ignored
// (adds 1) and, for metered code, a refuel that gives allowance units and
// counts its calls.
type runner struct {
	allowance int64
	refuels   int
	timeout   time.Duration // per call; 5 s when zero
}

func (rn *runner) run(t testing.TB, wasm []byte, names []string) []string {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true).WithMemoryLimitPages(64))
	defer rt.Close(ctx)
	if _, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(x int32) int32 { return x + 1 }).Export("ignored").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NewHostModuleBuilder(meter.ImportModule).NewFunctionBuilder().
		WithFunc(func() int32 { rn.refuels++; return int32(rn.allowance) }).Export(meter.ImportName).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	timeout := rn.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	mod, err := rt.Instantiate(ictx, wasm) // runs the start function
	cancel()
	if err != nil {
		return []string{"instantiate: " + cause(err)}
	}
	var out []string
	for _, name := range names {
		f := mod.ExportedFunction(name)
		if f == nil {
			t.Fatalf("no export %s", name)
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		res, err := f.Call(cctx)
		cancel()
		if err != nil {
			out = append(out, "trap: "+cause(err))
			continue
		}
		out = append(out, fmt.Sprint(res))
	}
	return out
}

// cause is the first line of a wazero error from its "wasm error: " on
// (before it, the message may name a function by index).
func cause(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, "wasm error: "); i >= 0 {
		msg = msg[i:]
	}
	return msg
}

var featureExports = []string{"sum", "fib", "multi", "refs", "mem", "simd", "nested", "uses_import"}

// TestInstrumentBehavesTheSame: every export of the feature module returns
// the same instrumented as not, whatever the allowance (1 refuels at every
// charge), and refuel is called as the charges predict.
func TestInstrumentBehavesTheSame(t *testing.T) {
	orig := features(t)
	want := (&runner{}).run(t, orig, featureExports)
	t.Logf("results: %v", want)
	out, st, err := meter.Instrument(orig)
	if err != nil {
		t.Fatal(err)
	}
	if st.Functions != 11 || st.Loops != 4 || st.Bulk != 6 {
		t.Errorf("stats %+v", st)
	}
	for _, allowance := range []int64{1, 1000, meter.MaxFuel} {
		rn := &runner{allowance: allowance}
		got := rn.run(t, out, featureExports)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("allowance %d:\n got %v\nwant %v", allowance, got, want)
		}
		t.Logf("allowance %d: %d refuels", allowance, rn.refuels)
		if allowance == 1 && rn.refuels < 100000+100*1000 {
			t.Errorf("allowance 1: %d refuels, want one per loop iteration at least", rn.refuels)
		}
		if allowance == meter.MaxFuel && rn.refuels != 1 {
			t.Errorf("allowance 2^30: %d refuels, want 1 (the first charge)", rn.refuels)
		}
	}
	for _, w := range want {
		if strings.HasPrefix(w, "trap") {
			t.Errorf("the feature module traps: %v", want)
		}
	}
}

// TestInstrumentExamples: the example guests (built by `make plugins
// c-plugins`) instrument into modules wazero compiles.
func TestInstrumentExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(wt.RepoRoot(t), "plugins/examples/*/*.wasm"))
	if len(files) == 0 {
		t.Skip("no example built (make plugins c-plugins)")
	}
	ctx := context.Background()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, st, err := meter.Instrument(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		took := time.Since(start)
		rt := wazero.NewRuntime(ctx)
		if _, err := rt.CompileModule(ctx, out); err != nil {
			t.Fatalf("%s: instrumented module does not compile: %v", f, err)
		}
		rt.Close(ctx)
		t.Logf("%s: %d → %d bytes (+%.1f%%) in %v, %+v", filepath.Base(f), len(b), len(out), 100*float64(len(out)-len(b))/float64(len(b)), took.Round(time.Millisecond), st)
	}
}

// TestInstrumentRefuses: the original may not name what the meter adds.
func TestInstrumentRefuses(t *testing.T) {
	loop := wt.Minimal(wt.Loop)
	imports := wt.Minimal(wt.I32Const(0), wt.Import{Module: meter.ImportModule, Name: meter.ImportName, Results: []byte{wt.I32}})
	callPast := wt.Minimal(append(wt.Call(2), 0x1a, 0x41, 0x00)) // call 2: there are 2 functions
	globalPast := wt.Minimal([]byte{0x23, 0x00})                 // global.get 0: there is none
	typePast := wt.Minimal([]byte{0x02, 0x02, 0x0b, 0x41, 0x00}) // block (type 2): there are 2 types
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"meter import", imports.Bytes(), `imports wasmstream_meter.refuel`},
		{"function index", callPast.Bytes(), "reference to function 2, but the module has 2 functions"},
		{"global index", globalPast.Bytes(), "reference to global 0, but the module has 0 globals"},
		{"type index", typePast.Bytes(), "block type 2, but the module has 2 types"},
		{"threads", wt.Minimal([]byte{0xfe, 0x03, 0x00, 0x41, 0x00}).Bytes(), "opcode 0xfe"},
		{"truncated", loop.Bytes()[:len(loop.Bytes())-3], "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := meter.Instrument(tc.wasm)
			var me *meter.Error
			if err == nil || !errors.As(err, &me) || (tc.want != "malformed" && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzInstrument: Instrument never panics; a module wazero compiles is
// instrumented, the result compiles too, and its exported functions without
// parameters return the same results (or trap alike) with any allowance.
func FuzzInstrument(f *testing.F) {
	f.Add(features(f))
	f.Add(wt.Minimal(wt.Loop).Bytes())
	f.Add(wt.LogLoop(10, 1, 4).Bytes())
	m := wt.Minimal(wt.I32Const(0))
	m.Tables = []wt.Table{{Min: 3}}
	m.Globals = 2
	m.Elements = []int{2}
	m.Data = [][]byte{[]byte("abc")}
	m.HasStart = true
	f.Add(m.Bytes())
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	f.Cleanup(func() { rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := meter.Instrument(b)
		if err != nil {
			var me *meter.Error
			if !errors.As(err, &me) {
				t.Fatalf("error of type %T: %v", err, err)
			}
		}
		// As the host does (host/bounds.go), hand wazero only modules whose
		// declarations wasmbin measured: wazero allocates what a module
		// declares, and a 500-byte module can keep it busy for seconds.
		sum, rerr := wasmbin.Read(b)
		if rerr != nil {
			return
		}
		cm, cerr, panicked := compile(ctx, rt, b)
		if panicked != nil {
			// wazero's own bug: the meter must have refused the module,
			// so that the host never hands it to wazero.
			if err == nil {
				t.Fatalf("wazero panics compiling a module the meter accepts: %v", panicked)
			}
			return
		}
		if cerr != nil {
			return
		}
		defer cm.Close(ctx)
		if err != nil {
			t.Fatalf("wazero compiles the module, Instrument refuses it: %v", err)
		}
		cm2, err, panicked := compile(ctx, rt, out)
		if panicked != nil {
			t.Fatalf("wazero panics compiling the instrumented module: %v", panicked)
		}
		if err != nil {
			t.Fatalf("the instrumented module does not compile: %v", err)
		}
		cm2.Close(ctx)
		// Behaviour: only modules without imports of their own, calling
		// exports that take nothing.
		if len(cm.ImportedFunctions()) > 0 || len(cm.ImportedMemories()) > 0 {
			return
		}
		var elems uint64
		for _, tb := range sum.Tables {
			elems += uint64(tb.Min)
		}
		if elems > 1<<16 {
			return // instantiation would allocate the tables
		}
		var names []string
		for name, fd := range cm.ExportedFunctions() {
			if len(fd.ParamTypes()) == 0 {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			return
		}
		// A call that runs out of time (a loop, or the metered code with
		// an allowance of 1) cannot be compared.
		timedOut := func(res []string) bool {
			return strings.Contains(strings.Join(res, "|"), "context deadline")
		}
		want := (&runner{timeout: 100 * time.Millisecond}).run(t, b, names)
		if timedOut(want) {
			return
		}
		for _, allowance := range []int64{1, 977, meter.MaxFuel} {
			got := (&runner{allowance: allowance, timeout: 300 * time.Millisecond}).run(t, out, names)
			if timedOut(got) {
				continue
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("allowance %d:\n got %v\nwant %v", allowance, got, want)
			}
		}
	})
}

// compile compiles b, recovering a panic of wazero's.
func compile(ctx context.Context, rt wazero.Runtime, b []byte) (cm wazero.CompiledModule, err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	cm, err = rt.CompileModule(ctx, b)
	return cm, err, nil
}

// BenchmarkLoop: one iteration of a tight loop (a counter and a compare)
// as compiled by wazero, plain and metered: the meter's cost per iteration.
func BenchmarkLoop(b *testing.B) {
	const n = 1_000_000
	mod := wt.Minimal(append(wt.Repeat(n, 2, nil), wt.I32Const(0)...))
	mod.Funcs[1].Locals = []wt.Locals{{N: 1, Type: wt.I32}}
	plain := mod.Bytes()
	metered, _, err := meter.Instrument(plain)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		wasm []byte
	}{{"plain", plain}, {"metered", metered}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			rt := wazero.NewRuntime(ctx)
			defer rt.Close(ctx)
			if _, err := rt.NewHostModuleBuilder(meter.ImportModule).NewFunctionBuilder().
				WithFunc(func() int32 { return 1 << 20 }).Export(meter.ImportName).Instantiate(ctx); err != nil {
				b.Fatal(err)
			}
			m, err := rt.Instantiate(ctx, tc.wasm)
			if err != nil {
				b.Fatal(err)
			}
			f := m.ExportedFunction("wasmstream_on_record")
			stack := make([]uint64, 2)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := f.CallWithStack(ctx, stack); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/iter")
		})
	}
}
