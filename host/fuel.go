package host

import (
	"context"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/host/internal/meter"
)

// Guest code is instrumented at load with a fuel counter
// (host/internal/meter): every function entry and loop header subtracts the
// instructions of the code it opens, and when the fuel goes below zero the
// guest calls refuel, which checks the clock. This is how a record deadline
// interrupts a guest (RATIONALE.md, "Faults and instances").
//
// One unit of fuel is about one instruction: 0.2–1 ns for ordinary code, up
// to ~50 ns for an instruction that misses every cache. refuel adapts the
// allowance to the guest: within a call it aims at one refuel every
// fuelInterval, shrinking the allowance in proportion when fuel burned
// slower than that and doubling it (up to fuelMax) when it burned faster.
// A runaway guest is therefore interrupted within about fuelInterval of its
// deadline (TestRunawayGuestsInterrupted measures 0.2–0.3 ms, ~1 ms when
// one memory.fill of 32 MiB is the indivisible step). The worst case is a
// guest that burns fuel fast, then turns to cache-missing loads: fuelMax
// units at ~50 ns, ~50 ms. A refuel costs ~0.1–0.2 µs, a thousandth of
// the interval.
const (
	fuelInterval = 250 * time.Microsecond
	fuelMax      = 1 << 20
	fuelMin      = 1 << 12
)

// fuelState is an instance's side of the meter.
type fuelState struct {
	// deadline and parent bound the call in progress (or the
	// instantiation): refuel traps after deadline or once parent ends.
	deadline time.Time
	parent   context.Context
	during   string // "record" or "initialisation", for the message
	// allowance is what refuel returns; last is when it last did in this
	// call (zero at the start of a call: the fuel left from an earlier call
	// says nothing of this one's pace).
	allowance int64
	last      time.Time
	refuels   uint64 // counted for tests and benchmarks
}

func (m *Module) instantiateMeter(ctx context.Context) error {
	_, err := m.rt.NewHostModuleBuilder(meter.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostRefuel), nil, []api.ValueType{api.ValueTypeI32}).
		Export(meter.ImportName).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: instantiate %s: %w", meter.ImportModule, err)
	}
	return nil
}

// refuel() -> allowance, or a trap (a *Fault of kind deadline or canceled).
func hostRefuel(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	if in == nil {
		panic(&Fault{Kind: FaultProtocol, Msg: "refuel outside a call"})
	}
	stack[0] = uint64(in.refuel(mod))
}

func (in *Instance) refuel(mod api.Module) int64 {
	f := &in.fuel
	now := time.Now()
	f.refuels++
	if f.parent != nil {
		if err := f.parent.Err(); err != nil {
			in.fault = &Fault{Kind: FaultCanceled, Msg: "call abandoned by the host: " + err.Error()}
			panic(in.fault)
		}
	}
	if mod.IsClosed() {
		in.fault = &Fault{Kind: FaultCanceled, Msg: "call abandoned by the host: the instance was closed"}
		panic(in.fault)
	}
	if !now.Before(f.deadline) {
		if f.during == "record" {
			in.fault = &Fault{Kind: FaultDeadline, Msg: fmt.Sprintf("record deadline of %s exceeded; the guest was interrupted (limits.record_timeout)", in.m.limits.RecordTimeout)}
		} else {
			in.fault = &Fault{Kind: FaultDeadline, Msg: fmt.Sprintf("%s exceeded its deadline; the guest was interrupted", f.during)}
		}
		panic(in.fault)
	}
	if f.allowance == 0 {
		f.allowance = fuelMax
	}
	if !f.last.IsZero() {
		if took := now.Sub(f.last); took > fuelInterval {
			f.allowance = max(fuelMin, int64(float64(f.allowance)*float64(fuelInterval)/float64(took)))
		} else {
			f.allowance = min(fuelMax, 2*f.allowance)
		}
	}
	f.last = now
	return f.allowance
}

// startCall arms the meter for a call that must end by deadline, and be
// abandoned when parent ends.
func (f *fuelState) startCall(parent context.Context, deadline time.Time, during string) {
	f.parent, f.deadline, f.during, f.last = parent, deadline, during, time.Time{}
}

func (f *fuelState) endCall() { f.parent = nil }
