//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

//go:wasmimport wasmstream_v1 record_read
func hostRecordRead(handle uint32, buf unsafe.Pointer, bufLen uint32) int32

//go:wasmimport wasmstream_v1 emit
func hostEmit(handle uint32, ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream_v1 set_error
func hostSetError(handle uint32, ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream_v1 log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport wasmstream_v1 async_start
func hostAsyncStart(handle uint32, kind int32, ptr unsafe.Pointer, n uint32) int32

//go:wasmimport wasmstream_v1 result_read
func hostResultRead(op uint32, buf unsafe.Pointer, n uint32) int32

//go:wasmexport wasmstream_abi_version
func abiVersion() int32 { return abi.Version }

// Buffers reused across calls: an instance runs one call at a time. A
// record that goes pending keeps its buffer and Record; the next one gets
// new ones.
var (
	inBuf  []byte
	outBuf []byte
	rec    = new(Record)
	// decoded is the last record decoded: its topic string is reused while
	// records come from the same topic.
	decoded abi.Record
)

func startOp(handle uint32, kind abi.OpKind, req []byte) (uint32, error) {
	rc := hostAsyncStart(handle, int32(kind), bytesPtr(req), uint32(len(req)))
	if rc < 0 {
		return 0, abi.Errno(-rc)
	}
	return uint32(rc), nil
}

//go:wasmexport wasmstream_on_complete
func onComplete(handle, op, n uint32) int32 {
	buf := make([]byte, n) // the continuation may keep what it decodes
	if rc := hostResultRead(op, bytesPtr(buf), n); rc < 0 {
		return fail(handle, "result_read: "+abi.Errno(-rc).Error())
	}
	st, msg := complete(handle, op, buf)
	if msg != "" && st != abi.StatusPending {
		hostSetError(handle, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	}
	return int32(st)
}

type emitter struct{ handle uint32 }

func (e emitter) Emit(o Output) error {
	ao := toABIOutput(&o)
	outBuf = abi.AppendOutput(outBuf[:0], &ao)
	if rc := hostEmit(e.handle, bytesPtr(outBuf), uint32(len(outBuf))); rc < 0 {
		return abi.Errno(-rc)
	}
	return nil
}

//go:wasmexport wasmstream_on_record
func onRecord(handle uint32, n uint32) int32 {
	if processor == nil {
		msg := "guest: no processor registered (call guest.Process from init)"
		hostSetError(handle, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
		return int32(abi.StatusFail)
	}
	if cap(inBuf) < int(n) {
		inBuf = make([]byte, n)
	}
	inBuf = inBuf[:n]
	if rc := hostRecordRead(handle, bytesPtr(inBuf), n); rc < 0 {
		return fail(handle, "record_read: "+abi.Errno(-rc).Error())
	}
	if err := abi.DecodeRecordInto(inBuf, &decoded); err != nil {
		return fail(handle, err.Error())
	}
	fromABIRecord(&decoded, rec)
	curHandle = handle
	err := processor(rec, emitter{handle})
	curHandle = 0
	st, msg := decide(handle, err)
	switch {
	case st == abi.StatusPending:
		inBuf, rec = nil, new(Record) // the waiting record keeps them
	case msg != "":
		hostSetError(handle, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	}
	return int32(st)
}

func fail(handle uint32, msg string) int32 {
	hostSetError(handle, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	return int32(abi.StatusFail)
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// Log writes a message to the host's log at the given level (abi.LogDebug …
// abi.LogError), attributed to the pipeline and instance.
func Log(level int32, msg string) {
	hostLog(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}
