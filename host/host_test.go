package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

var (
	buildOnce sync.Map // dir -> func() []byte
)

// guest builds an example processor once per test binary.
func guest(t testing.TB, dir string) []byte {
	f, _ := buildOnce.LoadOrStore(dir, sync.OnceValue(func() []byte { return wt.BuildGoGuest(t, dir) }))
	return f.(func() []byte)()
}

func newEngine(t testing.TB) *Engine {
	e, err := NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func load(t testing.TB, wasm []byte, lim Limits) *Module {
	t.Helper()
	m, err := newEngine(t).Load(context.Background(), wasm, ModuleConfig{Name: "test", Limits: lim, AllowedTopics: []string{"side"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func newInstance(t testing.TB, m *Module) *Instance {
	t.Helper()
	in, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestUppercaseGuest(t *testing.T) {
	m := load(t, guest(t, "plugins/examples/uppercase"), Limits{})
	if info := m.Info(); info.ABIVersion != 1 || len(info.Digest) != 64 || info.MemoryMin == 0 {
		t.Fatalf("info %+v", info)
	}
	in := newInstance(t, m)
	for i := 0; i < 100; i++ {
		res := in.Process(context.Background(), &abi.Record{Topic: "in", Offset: int64(i), Key: []byte("k"), Value: []byte("abc"), Attempt: 1,
			Headers: []abi.Header{{Key: "h", Value: []byte("v")}}}, nil)
		if res.Err != nil || res.Status != abi.StatusOK {
			t.Fatalf("record %d: %v %v", i, res.Status, res.Err)
		}
		if len(res.Outputs) != 1 || string(res.Outputs[0].Value) != "ABC" || string(res.Outputs[0].Key) != "k" || res.Outputs[0].Headers[0].Key != "h" {
			t.Fatalf("outputs %+v", res.Outputs)
		}
	}
}

func TestGuestFaults(t *testing.T) {
	m := load(t, guest(t, "plugins/examples/enrich"), Limits{MemoryPages: 256, RecordTimeout: 3 * time.Second})
	for _, tc := range []struct {
		fault  string
		status abi.Status
		kind   FaultKind // "" for a guest-reported failure
		msg    string
	}{
		{"fail", abi.StatusFail, "", "asked to fail"},
		{"retry", abi.StatusRetry, "", "asked to retry"},
		{"panic", abi.StatusRetry, FaultPanic, "guest panic: asked to panic"},
		{"exit", abi.StatusRetry, FaultExit, "exited with code 3"},
		{"loop", abi.StatusRetry, FaultDeadline, "record deadline of 3s exceeded"},
		{"oom", abi.StatusRetry, FaultOOM, "out of memory"},
		{"badptr", abi.StatusRetry, FaultBadPointer, "emit(ptr=0xffff0000, len=65536) is outside guest memory"},
		// No preopened directories: the guest gets an error, not the file.
	} {
		t.Run(tc.fault, func(t *testing.T) {
			in := newInstance(t, m)
			defer in.Close(context.Background())
			start := time.Now()
			res := in.Process(context.Background(), &abi.Record{Topic: "in", Value: []byte(`{"fault":"` + tc.fault + `"}`)}, nil)
			if res.Status != tc.status || res.Err == nil || len(res.Outputs) != 0 {
				t.Fatalf("status %v err %v outputs %d", res.Status, res.Err, len(res.Outputs))
			}
			if !strings.Contains(res.Err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", res.Err, tc.msg)
			}
			f := res.Fault()
			if tc.kind == "" {
				if f != nil || in.Dead() {
					t.Fatalf("a guest-reported failure must not kill the instance: %v", f)
				}
				var ge *GuestError
				if !errors.As(res.Err, &ge) {
					t.Fatalf("want *GuestError, got %T", res.Err)
				}
			} else {
				if f == nil || f.Kind != tc.kind {
					t.Fatalf("fault %+v, want kind %s", f, tc.kind)
				}
				if !in.Dead() {
					t.Fatal("a faulted instance must be dead")
				}
			}
			if tc.kind == FaultDeadline && time.Since(start) > 6*time.Second {
				t.Fatalf("deadline fault took %v", time.Since(start))
			}
			// A fresh instance processes normally after any fault.
			in2 := newInstance(t, m)
			defer in2.Close(context.Background())
			res = in2.Process(context.Background(), &abi.Record{Topic: "in", Value: []byte(`{"ok":1}`)}, nil)
			if res.Err != nil || len(res.Outputs) != 1 || !strings.Contains(string(res.Outputs[0].Value), `"enriched":true`) {
				t.Fatalf("after fault: %+v", res)
			}
		})
	}
}

func TestIncompatibleModules(t *testing.T) {
	hostImport := func(mod, name string) wt.Import {
		return wt.Import{Module: mod, Name: name, Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}}
	}
	ok := wt.Minimal(wt.I32Const(0))
	noOnRecord := wt.Minimal(wt.I32Const(0))
	noOnRecord.Funcs = noOnRecord.Funcs[:1]
	badSig := wt.Minimal(wt.I32Const(0))
	badSig.Funcs[1].Params = []byte{wt.I32}
	bigMem := wt.Minimal(wt.I32Const(0))
	bigMem.MemoryMin = 100
	noMem := wt.Minimal(wt.I32Const(0))
	noMem.NoMemory = true
	version2 := wt.Minimal(wt.I32Const(0))
	version2.Funcs[0].Body = wt.I32Const(2)
	initTrap := wt.Minimal(wt.I32Const(0))
	initTrap.Funcs = append(initTrap.Funcs, wt.Func{Export: "_initialize", Body: wt.Unreachable})

	if _, err := newEngine(t).Load(context.Background(), ok.Bytes(), ModuleConfig{}); err != nil {
		t.Fatalf("the minimal module must load: %v", err)
	}
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"not wasm", []byte("#!/bin/sh\necho hello\n"), "not a WebAssembly module"},
		{"empty", nil, "not a WebAssembly module"},
		{"truncated", ok.Bytes()[:20], "incompatible module"},
		{"abi v2", wt.Minimal(wt.I32Const(0), hostImport("wasmstream_v2", "emit")).Bytes(), "built for wasmstream ABI v2 (imports wasmstream_v2.emit); this host implements ABI v1"},
		{"unknown host function", wt.Minimal(wt.I32Const(0), hostImport("wasmstream_v1", "teleport")).Bytes(), "imports unknown host function wasmstream_v1.teleport"},
		{"wrong import signature", wt.Minimal(wt.I32Const(0), wt.Import{Module: "wasmstream_v1", Name: "emit", Params: []byte{wt.I32}}).Bytes(), "imports wasmstream_v1.emit as func(i32) -> (), want func(i32, i32, i32) -> (i32)"},
		{"unknown module", wt.Minimal(wt.I32Const(0), hostImport("env", "socket")).Bytes(), `from unknown module "env"`},
		{"missing export", noOnRecord.Bytes(), "missing required export wasmstream_on_record (func(i32, i32) -> (i32))"},
		{"wrong export signature", badSig.Bytes(), "export wasmstream_on_record is func(i32) -> (i32), want func(i32, i32) -> (i32)"},
		{"memory over limit", bigMem.Bytes(), "memory minimum exceeds the limit of 64 pages (limits.memory_pages)"},
		{"no memory", noMem.Bytes(), `missing required export "memory"`},
		{"version 2", version2.Bytes(), "wasmstream_abi_version() returned 2; this host implements ABI v1"},
		{"initialiser traps", initTrap.Bytes(), "instantiate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newEngine(t).Load(context.Background(), tc.wasm, ModuleConfig{Limits: Limits{MemoryPages: 64}})
			if err == nil || !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestHandBuiltFaults(t *testing.T) {
	emit := wt.Import{Module: "wasmstream_v1", Name: "emit", Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}}
	concat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		mod  wt.Module
		kind FaultKind
		msg  string
	}{
		{"unreachable", wt.Minimal(wt.Unreachable), FaultTrap, "wasm error: unreachable"},
		{"invalid status", wt.Minimal(wt.I32Const(77)), FaultProtocol, "invalid status 77"},
		{"pending without async", wt.Minimal(wt.I32Const(1)), FaultProtocol, "pending"},
		{"infinite loop", wt.Minimal(concat(wt.Loop, wt.I32Const(0))), FaultDeadline, "deadline"},
		// emit(handle, ptr=65530, len=100): crosses the end of the 1-page memory.
		{"emit past memory end", wt.Minimal(concat(wt.LocalGet(0), wt.I32Const(65530), wt.I32Const(100), wt.Call(0)), emit), FaultBadPointer, "emit(ptr=0xfffa, len=100) is outside guest memory of 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, tc.mod.Bytes(), Limits{RecordTimeout: 200 * time.Millisecond})
			in := newInstance(t, m)
			res := in.Process(context.Background(), &abi.Record{Topic: "t"}, nil)
			f := res.Fault()
			if f == nil || f.Kind != tc.kind || !strings.Contains(f.Error(), tc.msg) || !in.Dead() {
				t.Fatalf("got %v (dead=%v), want %s fault containing %q", res.Err, in.Dead(), tc.kind, tc.msg)
			}
		})
	}
}

// TestUnboundedRecursion: wasmstream_on_record (function 1) calls itself
// without end. The engine's call-stack bound traps it long before the record
// deadline; the instance is discarded and the stack memory goes with it.
func TestUnboundedRecursion(t *testing.T) {
	body := append(append(wt.LocalGet(0), wt.LocalGet(1)...), wt.Call(1)...)
	m := load(t, wt.Minimal(body).Bytes(), Limits{RecordTimeout: time.Minute})
	in := newInstance(t, m)
	start := time.Now()
	res := in.Process(context.Background(), &abi.Record{Topic: "t"}, nil)
	f := res.Fault()
	if f == nil || f.Kind != FaultTrap || !strings.Contains(f.Msg, "stack overflow") || !in.Dead() {
		t.Fatalf("got %v (dead=%v), want a trap fault with \"stack overflow\"", res.Err, in.Dead())
	}
	t.Logf("%v after %v; %s", f, time.Since(start).Round(time.Millisecond), vmRSS())
}

func TestEmitErrnos(t *testing.T) {
	// emit with a malformed encoding (4 zero bytes: topic "" then nothing)
	// returns -ErrnoBadEncoding to the guest, which returns it as its status.
	emit := wt.Import{Module: "wasmstream_v1", Name: "emit", Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}}
	body := append(append(append(wt.LocalGet(0), wt.I32Const(0)...), wt.I32Const(4)...), wt.Call(0)...)
	m := load(t, wt.Minimal(body, emit).Bytes(), Limits{})
	in := newInstance(t, m)
	res := in.Process(context.Background(), &abi.Record{Topic: "t"}, nil)
	// -3 is not a valid status: the protocol fault message carries it.
	if f := res.Fault(); f == nil || !strings.Contains(f.Msg, "invalid status -3") {
		t.Fatalf("got %v", res.Err)
	}
}

func TestCanceledCall(t *testing.T) {
	m := load(t, guest(t, "plugins/examples/enrich"), Limits{RecordTimeout: time.Minute})
	in := newInstance(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := in.Process(ctx, &abi.Record{Topic: "in", Value: []byte(`{"fault":"loop"}`)}, nil)
	if f := res.Fault(); f == nil || f.Kind != FaultCanceled {
		t.Fatalf("got %v", res.Err)
	}
}

func BenchmarkProcessMinimal(b *testing.B) {
	m := load(b, wt.Minimal(wt.I32Const(0)).Bytes(), Limits{})
	in := newInstance(b, m)
	rec := &abi.Record{Topic: "in", Key: []byte("key-0001"), Value: []byte(strings.Repeat("x", 100)), Attempt: 1}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := in.Process(ctx, rec, nil); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

// TestOversubscribedInstancesMeetDeadlines: many more busy instances than
// cores. The Go scheduler cannot preempt a goroutine inside guest code, so
// without the engine's bound on running calls some calls sat runnable for
// seconds (measured: p99.99 1.6 s, max 2.5 s for ~150 µs calls with 18
// instances on 2 cores) and hit their deadline for no fault of their own.
func TestOversubscribedInstancesMeetDeadlines(t *testing.T) {
	m := load(t, guest(t, "plugins/examples/hash"), Limits{RecordTimeout: time.Second})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lat []time.Duration
	faults := 0
	stop := time.Now().Add(4 * time.Second)
	// A ticker beside the guests: how late the Go scheduler runs other
	// goroutines (Kafka clients, timers) while every core runs guest code.
	var late []time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(stop) {
			s := time.Now()
			time.Sleep(time.Millisecond)
			late = append(late, time.Since(s)-time.Millisecond)
		}
	}()
	for g := 0; g < 18; g++ {
		in := newInstance(t, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &abi.Record{Topic: "in", Value: []byte("0123456789"), Attempt: 1, Headers: []abi.Header{{Key: "rounds", Value: []byte("25")}}}
			for time.Now().Before(stop) {
				start := time.Now()
				res := in.Process(context.Background(), rec, nil)
				mu.Lock()
				lat = append(lat, time.Since(start))
				if res.Err != nil {
					faults++
					if faults == 1 {
						t.Errorf("call failed: %v", res.Err)
					}
				}
				mu.Unlock()
				if res.Err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	slices.Sort(late)
	q := func(x []time.Duration, p float64) time.Duration {
		return x[int(float64(len(x)-1)*p)].Round(time.Microsecond)
	}
	t.Logf("%d calls on 18 instances, %d faults; call time (slot wait included) p50 %s, p99 %s, p99.9 %s, max %s; a 1 ms ticker beside them late by p50 %s, p99 %s, max %s",
		len(lat), faults, q(lat, .5), q(lat, .99), q(lat, .999), q(lat, 1), q(late, .5), q(late, .99), q(late, 1))
}
