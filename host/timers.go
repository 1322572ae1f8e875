package host

// Event-time timers (ABI.md §4.2): timer_set and timer_delete, a state
// write of the record in progress; and the firing of a due timer, a call
// of the module's wasmstream_on_timer, which the engine makes with
// ProcessTimer as it would Process a record.

import (
	"context"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// Timers is the part of a State that serves timer_set and timer_delete: a
// State that does not implement it answers them with ErrnoNoState. Its
// methods are called as State's are.
type Timers interface {
	// SetTimer sets the timer (key, at) for the record, DeleteTimer
	// removes it: writes of the record's, like Put and Delete, checked
	// like a state key (ErrnoTooLarge, ErrnoWrongKey) and bounded by
	// state.max_bytes (ErrnoLimit).
	SetTimer(key []byte, at int64) abi.Errno
	DeleteTimer(key []byte, at int64) abi.Errno
	// WrittenTimer reports whether the record wrote the timer (key, at)
	// already: what a new write of it replaces in the record's bounds.
	WrittenTimer(key []byte, at int64) bool
}

// timerWriteBytes is what a timer counts in limits.max_output_bytes
// beside its key: its at.
const timerWriteBytes = 8

// timer_set(handle, key, key_len, at i64) -> 0 | -errno
func hostTimerSet(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = errno(timerWrite(ctx, mod, stack, abi.ImportTimerSet, true))
}

// timer_delete(handle, key, key_len, at i64) -> 0 | -errno
func hostTimerDelete(ctx context.Context, mod api.Module, stack []uint64) {
	stack[0] = errno(timerWrite(ctx, mod, stack, abi.ImportTimerDelete, false))
}

// timerWrite sets (set) or deletes the timer named by timer_set's or
// timer_delete's arguments, counted as a state write of its key and 8
// bytes (countWrite). During a firing, a timer at or before the firing's
// own cannot be set (ErrnoLimit): each firing deletes its timer, so a
// round of firings always ends.
func timerWrite(ctx context.Context, mod api.Module, stack []uint64, fn string, set bool) abi.Errno {
	in, rs, key, e := stateCall(ctx, mod, stack, fn)
	if e != 0 {
		return e
	}
	at := int64(stack[3])
	tm, ok := rs.state.(Timers)
	switch {
	case !ok:
		return abi.ErrnoNoState
	case set && rs.firing && at <= rs.firingAt:
		return abi.ErrnoLimit
	}
	wrote := tm.WrittenTimer(key, at)
	return in.countWrite(rs, len(key)+timerWriteBytes, 0, 0, wrote, func() abi.Errno {
		if set {
			return tm.SetTimer(key, at)
		}
		return tm.DeleteTimer(key, at)
	})
}

// checkOnTimer checks the timer entry: a module that imports timer_set
// must export it (its timers could never fire otherwise), with the
// signature of wasmstream_on_record. It notes in the module's info that
// the module has timers.
func (m *Module) checkOnTimer(exports map[string]api.FunctionDefinition, timers bool, probs []string) []string {
	f, ok := exports[abi.ExportOnTimer]
	switch {
	case ok && !onTimerSig.matches(f.ParamTypes(), f.ResultTypes()):
		return append(probs, fmt.Sprintf("export %s is %s, want %s", abi.ExportOnTimer, sig{f.ParamTypes(), f.ResultTypes()}, onTimerSig))
	case timers && !ok:
		return append(probs, fmt.Sprintf("imports %s.%s but does not export %s (%s): its timers could never fire", abi.HostModule, abi.ImportTimerSet, abi.ExportOnTimer, onTimerSig))
	}
	m.info.Timers = timers
	return probs
}

// ProcessTimer calls the module's wasmstream_on_timer with the firing f
// (its encoding, ABI.md §4.2, read with record_read), its state calls
// answered by st, and returns its outcome as Process does a record's. A
// firing cannot wait: pending is a protocol fault (the instance is
// closed). A module without the export fails the call with a protocol
// fault.
func (in *Instance) ProcessTimer(ctx context.Context, f *abi.TimerFiring, tag any, st State) Result {
	if in.dead || in.entry.timer == nil {
		now := time.Now()
		in.calls.start, in.calls.end = now, now
		msg := "instance is closed"
		if !in.dead {
			msg = "the module does not export " + abi.ExportOnTimer
		}
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: msg}}
	}
	rs := in.newRec(tag)
	rs.state, in.nextState = st, nil
	rs.firing, rs.firingAt = true, f.At
	if n := abi.TimerFiringSize(f); cap(rs.enc) < n {
		rs.enc = make([]byte, 0, n)
	}
	rs.enc = abi.AppendTimerFiring(rs.enc[:0], f)
	res := in.call(ctx, rs, nil, func() ([]uint64, api.Function) {
		s := in.stack[:2]
		s[0], s[1] = uint64(rs.handle), uint64(len(rs.enc))
		return s, in.entry.timer
	})
	if res.Err == nil && res.Status == abi.StatusPending {
		in.finishRec(rs)
		in.Close(context.Background())
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: abi.ExportOnTimer + " returned pending: a timer firing cannot wait on asynchronous operations"}}
	}
	return in.settle(rs, res, true)
}

// HasTimers reports whether the module sets event-time timers (Info.Timers),
// without copying its Info: the engine asks it as records are decided.
func (m *Module) HasTimers() bool { return m != nil && m.info.Timers }
