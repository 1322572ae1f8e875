package host

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// maxMessage bounds error and log messages taken from a guest.
const maxMessage = 4096

func (m *Module) instantiateHostModule(ctx context.Context) error {
	b := m.rt.NewHostModuleBuilder(abi.HostModule)
	def := func(name string, fn api.GoModuleFunc) {
		s := hostFuncs[name]
		b.NewFunctionBuilder().WithGoModuleFunction(fn, s.params, s.results).Export(name)
	}
	def(abi.ImportRecordRead, hostRecordRead)
	def(abi.ImportEmit, hostEmit)
	def(abi.ImportSetError, hostSetError)
	def(abi.ImportLog, hostLog)
	def(abi.ImportAsyncStart, hostAsyncStart)
	def(abi.ImportResultRead, hostResultRead)
	def(abi.ImportStateGet, hostStateGet)
	def(abi.ImportStatePut, hostStatePut)
	def(abi.ImportStateDelete, hostStateDelete)
	def(abi.ImportStateScan, hostStateScan)
	def(abi.ImportStateGet2, hostStateGet2)
	def(abi.ImportStatePut2, hostStatePut2)
	def(abi.ImportStateDelete2, hostStateDelete2)
	def(abi.ImportStateScan2, hostStateScan2)
	def(abi.ImportStreamTime, hostStreamTime)
	def(abi.ImportTimerSet, hostTimerSet)
	def(abi.ImportTimerDelete, hostTimerDelete)
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("host: instantiate %s: %w", abi.HostModule, err)
	}
	return nil
}

func instance(ctx context.Context) *Instance {
	in, _ := ctx.Value(instanceKey{}).(*Instance)
	return in
}

func errno(e abi.Errno) uint64 { return uint64(uint32(-int32(e))) }

// read returns guest memory [ptr, ptr+n) or faults the call: a pointer the
// guest passes is never trusted.
func (in *Instance) read(mod api.Module, fn string, ptr, n uint32) []byte {
	return in.readIn(mod, abi.HostModule, fn, ptr, n)
}

// readIn is read for a function of the import module module.
func (in *Instance) readIn(mod api.Module, module, fn string, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		in.badPointerIn(mod, module, fn, ptr, n)
	}
	return b
}

func (in *Instance) badPointer(mod api.Module, fn string, ptr, n uint32) {
	in.badPointerIn(mod, abi.HostModule, fn, ptr, n)
}

// badPointerIn faults the call: module.fn was handed memory outside the
// guest's.
func (in *Instance) badPointerIn(mod api.Module, module, fn string, ptr, n uint32) {
	in.fault = &Fault{Kind: FaultBadPointer, Msg: fmt.Sprintf("%s.%s(ptr=%#x, len=%d) is outside guest memory of %d bytes", module, fn, ptr, n, mod.Memory().Size())}
	panic(in.fault)
}

// current returns the record of the call in progress if handle names it.
func (in *Instance) current(handle uint32) *recState {
	if in == nil || in.cur == nil || in.cur.ended || handle == 0 || handle != in.cur.handle {
		return nil
	}
	return in.cur
}

// record_read(handle, buf, buf_len) -> n | -errno
func hostRecordRead(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	handle, buf, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	st := in.current(handle)
	if st == nil {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	if int(n) < len(st.enc) {
		stack[0] = errno(abi.ErrnoBufTooSmall)
		return
	}
	if !mod.Memory().Write(buf, st.enc) {
		in.badPointer(mod, abi.ImportRecordRead, buf, uint32(len(st.enc)))
	}
	stack[0] = uint64(len(st.enc))
}

// async_start(handle, kind, req, req_len) -> op | -errno
func hostAsyncStart(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	handle, kind, ptr, n := uint32(stack[0]), abi.OpKind(int32(stack[1])), uint32(stack[2]), uint32(stack[3])
	if in == nil {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	req := in.read(mod, abi.ImportAsyncStart, ptr, n)
	st := in.current(handle)
	if st == nil {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	id, e := in.startOp(kind, req)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	stack[0] = uint64(id)
}

// result_read(op, buf, buf_len) -> n | -errno
func hostResultRead(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	id, buf, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if in == nil || in.curOp == nil || id == 0 || id != in.curOp.id {
		stack[0] = errno(abi.ErrnoBadOp)
		return
	}
	res := in.curOp.result
	if int(n) < len(res) {
		stack[0] = errno(abi.ErrnoBufTooSmall)
		return
	}
	if !mod.Memory().Write(buf, res) {
		in.badPointer(mod, abi.ImportResultRead, buf, uint32(len(res)))
	}
	stack[0] = uint64(len(res))
}

// recordCall reads the arguments (handle, ptr, len) of the host function
// fn, a call about the record handle names: the instance, the record's
// state and the guest's bytes at ptr. The state is nil when handle names
// no record the instance is processing.
func recordCall(ctx context.Context, mod api.Module, stack []uint64, fn string) (*Instance, *recState, []byte) {
	in := instance(ctx)
	handle, ptr, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if in == nil {
		return nil, nil, nil
	}
	b := in.read(mod, fn, ptr, n)
	return in, in.current(handle), b
}

// emit(handle, ptr, len) -> 0 | -errno
func hostEmit(ctx context.Context, mod api.Module, stack []uint64) {
	in, st, raw := recordCall(ctx, mod, stack, abi.ImportEmit)
	if st == nil {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	if e := in.takeOutput(st, raw, true); e != 0 {
		stack[0] = errno(e)
		return
	}
	stack[0] = 0
}

// takeOutput holds the output encoded in raw for st, or returns why not.
// copyRaw: raw is guest memory, to be copied (once; the decoded output
// aliases the copy); otherwise raw is the host's already.
func (in *Instance) takeOutput(st *recState, raw []byte, copyRaw bool) abi.Errno {
	lim := in.m.limits
	if len(st.outputs)+st.written >= lim.MaxOutputs || st.outBytes+len(raw) > lim.MaxOutputBytes {
		return abi.ErrnoLimit
	}
	if copyRaw {
		raw = append([]byte(nil), raw...)
	}
	o, err := abi.DecodeOutput(raw)
	if err != nil {
		return abi.ErrnoBadEncoding
	}
	if o.Topic != "" && !in.m.allowed[o.Topic] {
		return abi.ErrnoTopicDenied
	}
	// Headers count what they cost decoded (at most abi.MaxHeaders of them
	// were decoded to learn it).
	cost := outputCost(len(raw), len(o.Headers))
	if st.outBytes+cost > lim.MaxOutputBytes || !in.holdOutput(st, cost) { // host.max_held_output_bytes
		return abi.ErrnoLimit
	}
	st.outputs = append(st.outputs, o)
	st.outBytes += cost
	return 0
}

// set_error(handle, ptr, len) -> 0 | -errno
func hostSetError(ctx context.Context, mod api.Module, stack []uint64) {
	_, st, msg := recordCall(ctx, mod, stack, abi.ImportSetError)
	if st == nil {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	st.errMsg = string(msg)
	stack[0] = 0
}

// log(level, ptr, len): the message (cut to maxMessage bytes) goes to the
// host's log unless the instance is over its log rate (guestlog.go).
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if in == nil {
		return
	}
	msg := in.read(mod, abi.ImportLog, ptr, n)
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	lv := slog.LevelInfo
	switch level {
	case abi.LogDebug:
		lv = slog.LevelDebug
	case abi.LogWarn:
		lv = slog.LevelWarn
	case abi.LogError:
		lv = slog.LevelError
	}
	if !in.m.log.Enabled(ctx, lv) {
		return // a level the host does not write costs the guest nothing
	}
	lim, now := &in.m.limits, time.Now()
	if !in.logs.take(now, len(msg)+logLineOverhead, lim.LogBytesPerSecond, lim.LogBurstBytes) {
		in.m.logDropped(now, len(msg))
		return
	}
	in.m.log.Log(ctx, lv, string(msg), "source", "guest", "instance", in.id)
}
