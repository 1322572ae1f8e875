package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

var (
	localSet = func(i byte) []byte { return []byte{0x21, i} }
	localTee = func(i byte) []byte { return []byte{0x22, i} }
	i32Add   = []byte{0x6a}
	i32Mul   = []byte{0x6c}
	i32And   = []byte{0x71}
	i32ShrU  = []byte{0x76}
	i32Load  = []byte{0x28, 0x02, 0x00}
	br0      = []byte{0x0c, 0x00}
	loopOpen = []byte{0x03, 0x40}
	blockEnd = []byte{0x0b}
)

// runaway guests, each on_record running until something stops it.
func runaways() map[string]wt.Module {
	m := map[string]wt.Module{}

	// for {}: a loop without calls.
	m["loop without calls"] = wt.Minimal(concat(wt.Loop, wt.I32Const(0)))

	// for { f() }: f (function 2) adds to its parameter.
	withCalls := wt.Minimal(concat(loopOpen, wt.I32Const(1), wt.Call(2), wt.Drop, br0, blockEnd, wt.I32Const(0)))
	withCalls.Funcs = append(withCalls.Funcs, wt.Func{Params: []byte{wt.I32}, Results: []byte{wt.I32},
		Body: concat(wt.LocalGet(0), wt.I32Const(3), i32Add)})
	m["loop with calls"] = withCalls

	// f(n) = n == 0 ? 0 : f(n-1) + f(n-1) + 1 with n = 60: a recursion 60
	// deep that would make 2^60 calls.
	rec := wt.Minimal(concat(wt.I32Const(60), wt.Call(2)))
	rec.Funcs = append(rec.Funcs, wt.Func{Params: []byte{wt.I32}, Results: []byte{wt.I32},
		Body: concat(wt.LocalGet(0), []byte{0x45, 0x04, wt.I32}, wt.I32Const(0), []byte{0x05}, // if n == 0 then 0 else
			wt.LocalGet(0), wt.I32Const(1), []byte{0x6b}, wt.Call(2), // f(n-1)
			wt.LocalGet(0), wt.I32Const(1), []byte{0x6b}, wt.Call(2), i32Add, // + f(n-1)
			wt.I32Const(1), i32Add, blockEnd)})
	m["deep recursion"] = rec

	// A long computation whose every load misses the caches: random
	// addresses over 32 MiB (locals 2 = x, 3 = sum).
	loads := wt.Minimal(concat(loopOpen,
		wt.LocalGet(2), wt.I32Const(1103515245), i32Mul, wt.I32Const(12345), i32Add, localTee(2),
		wt.I32Const(7), i32ShrU, wt.I32Const(0x1fffffc), i32And, i32Load,
		wt.LocalGet(3), i32Add, localSet(3), br0, blockEnd, wt.I32Const(0)))
	loads.MemoryMin = 512
	loads.Funcs[1].Locals = []wt.Locals{{N: 2, Type: wt.I32}}
	m["cache-missing loads"] = loads

	// A long computation in bulk instructions: memory.fill of 32 MiB, again
	// and again.
	fill := wt.Minimal(concat(loopOpen, wt.I32Const(0), wt.I32Const(0x5a), wt.I32Const(32<<20), []byte{0xfc, 11, 0x00}, br0, blockEnd, wt.I32Const(0)))
	fill.MemoryMin = 512
	m["bulk memory"] = fill
	return m
}

// fuelSlack is how late after limits.record_timeout a runaway guest is
// interrupted (fuel.go): one refuel interval for ordinary code. The
// assertion allows for a loaded test machine.
const fuelSlack = time.Millisecond

// TestRunawayGuestsInterrupted: whatever keeps a guest busy, the record
// deadline interrupts it within the slack, the instance is discarded and
// the next instance works.
func TestRunawayGuestsInterrupted(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for name, mod := range runaways() {
		t.Run(name, func(t *testing.T) {
			m := load(t, mod.Bytes(), Limits{RecordTimeout: timeout})
			in := newInstance(t, m)
			start := time.Now()
			res := in.Process(context.Background(), &abi.Record{Topic: "t"}, nil)
			late := time.Since(start) - timeout
			f := res.Fault()
			if f == nil || !in.Dead() {
				t.Fatalf("got %v (dead=%v), want a fault", res.Err, in.Dead())
			}
			switch {
			case f.Kind == FaultDeadline && strings.Contains(f.Msg, "record deadline of 300ms exceeded"):
				if late < 0 {
					t.Fatalf("interrupted %v before the deadline", -late)
				}
				if late > fuelSlack+50*time.Millisecond {
					t.Errorf("interrupted %v after the deadline, want within ~%v", late, fuelSlack)
				}
				t.Logf("interrupted %v after the deadline (%d refuels)", late.Round(10*time.Microsecond), in.fuel.refuels)
			case name == "deep recursion" && f.Kind == FaultTrap && strings.Contains(f.Msg, "stack overflow"):
				t.Logf("stack overflow after %v", time.Since(start))
			default:
				t.Fatalf("fault %v", f)
			}
			in2 := newInstance(t, m)
			if in2.Dead() {
				t.Fatal("a fresh instance is dead")
			}
			in2.Close(context.Background())
		})
	}
}

// TestShutdownInterruptsGuest: the caller's context ending interrupts a
// runaway guest (as at shutdown), long before its record deadline.
func TestShutdownInterruptsGuest(t *testing.T) {
	m := load(t, runaways()["loop without calls"].Bytes(), Limits{RecordTimeout: time.Minute})
	in := newInstance(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	res := in.Process(ctx, &abi.Record{Topic: "t"}, nil)
	if f := res.Fault(); f == nil || f.Kind != FaultCanceled || time.Since(start) > time.Second {
		t.Fatalf("got %v after %v", res.Err, time.Since(start))
	}
}

// TestModuleCloseInterruptsGuest: closing the module (engine shutdown) from
// another goroutine interrupts a call in progress.
func TestModuleCloseInterruptsGuest(t *testing.T) {
	m, err := newEngine(t).Load(context.Background(), runaways()["loop without calls"].Bytes(), ModuleConfig{Name: "test", Limits: Limits{RecordTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	in := newInstance(t, m)
	time.AfterFunc(100*time.Millisecond, func() { m.Close(context.Background()) })
	start := time.Now()
	res := in.Process(context.Background(), &abi.Record{Topic: "t"}, nil)
	if f := res.Fault(); f == nil || time.Since(start) > time.Second {
		t.Fatalf("got %v after %v", res.Err, time.Since(start))
	}
}

// TestInitialiserInterrupted: an initialiser that never returns is
// interrupted when the caller gives up, and the module refused.
func TestInitialiserInterrupted(t *testing.T) {
	mod := wt.Minimal(wt.I32Const(0))
	mod.Funcs = append(mod.Funcs, wt.Func{Export: "_initialize", Body: wt.Loop})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := newEngine(t).Load(ctx, mod.Bytes(), ModuleConfig{})
	if err == nil || !strings.Contains(err.Error(), "abandoned") || time.Since(start) > 5*time.Second {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
}

// TestMeteredHashGuest: the hash example, whose time is all in loops,
// computes under the meter what Go computes natively (the uppercase guests'
// outputs are checked by TestUppercaseGuest and TestCGuestUppercase).
func TestMeteredHashGuest(t *testing.T) {
	in := newInstance(t, load(t, guest(t, "plugins/examples/hash"), Limits{}))
	for i, rounds := range []int{1, 7, 1000} {
		value := []byte(strings.Repeat("metered ", i*50+1))
		res := in.Process(context.Background(), &abi.Record{Topic: "t", Value: value,
			Headers: []abi.Header{{Key: "rounds", Value: []byte(strconv.Itoa(rounds))}}}, nil)
		if res.Err != nil || len(res.Outputs) != 1 {
			t.Fatalf("%+v", res)
		}
		sum := sha256.Sum256(value)
		for r := 1; r < rounds; r++ {
			sum = sha256.Sum256(sum[:])
		}
		if want := hex.EncodeToString(sum[:]); !strings.Contains(string(res.Outputs[0].Value), want) {
			t.Fatalf("rounds %d: %s, want sha256 %s", rounds, res.Outputs[0].Value, want)
		}
	}
	if in.fuel.refuels == 0 {
		t.Fatal("the guest never refuelled: is it metered?")
	}
}
