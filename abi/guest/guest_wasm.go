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

// emitter takes the outputs of the record handle. A record that goes
// pending keeps its emitter for good (a continuation emits through it,
// and one kept past its record's decision must not emit for another
// record); the next record gets a new one, so that a record costs no
// allocation otherwise.
type emitter struct{ handle uint32 }

var em = newEmitter()

// emitters is where new emitters come from: 64 to an allocation (a Go
// guest pays ~0.5 µs for each). An emitter is never reused; a slab is
// freed once none of its emitters is referenced.
var emitters []emitter

func newEmitter() *emitter {
	if len(emitters) == 0 {
		emitters = make([]emitter, 64)
	}
	e := &emitters[0]
	emitters = emitters[1:]
	return e
}

func (e *emitter) Emit(o Output) error {
	ao := toABIOutput(&o)
	if e.handle == batchHandle && e.handle != 0 && !batchDirect {
		// A record of a batch: its outputs go to the host in one list,
		// with its status (record_next). The host's limits are checked
		// then: an output they refuse fails the record (ABI.md §10).
		if len(ao.Headers) > abi.MaxHeaders || ao.Partition < -1 {
			return abi.ErrnoBadEncoding
		}
		batchOut = abi.AppendOutputList(batchOut, &ao)
		if batchOutN++; batchOutN < listMaxOutputs && len(batchOut) < listMaxBytes {
			return nil
		}
		// A record with many outputs: from here on they go to the host
		// one by one, in order, so that Emit returns a limit when the
		// host refuses (a processor may emit until it does).
		batchDirect = true
		return emitList(e.handle)
	}
	outBuf = abi.AppendOutput(outBuf[:0], &ao)
	if rc := hostEmit(e.handle, bytesPtr(outBuf), uint32(len(outBuf))); rc < 0 {
		return abi.Errno(-rc)
	}
	return nil
}

// A batch record's output list holds at most this many outputs and bytes;
// past them, its outputs are emitted one by one.
const (
	listMaxOutputs = 64
	listMaxBytes   = 64 << 10
)

// emitList emits the outputs of the output list one by one and empties it.
func emitList(handle uint32) error {
	list := batchOut
	batchOut = batchOut[:0]
	for len(list) >= 4 {
		n := uint32(list[0]) | uint32(list[1])<<8 | uint32(list[2])<<16 | uint32(list[3])<<24
		if rc := hostEmit(handle, bytesPtr(list[4:4+n]), n); rc < 0 {
			return abi.Errno(-rc) // the rest is dropped, as after a refused Emit
		}
		list = list[4+n:]
	}
	return nil
}

//go:wasmexport wasmstream_on_record
func onRecord(handle uint32, n uint32) int32 {
	if processor == nil {
		return fail(handle, noProcessor)
	}
	if cap(inBuf) < int(n) {
		inBuf = make([]byte, n)
	}
	inBuf = inBuf[:n]
	if rc := hostRecordRead(handle, bytesPtr(inBuf), n); rc < 0 {
		return fail(handle, "record_read: "+abi.Errno(-rc).Error())
	}
	return int32(run(handle, inBuf))
}

const noProcessor = "guest: no processor registered (call guest.Process from init)"

// run processes the record handle, encoded in buf, and returns its status
// (a failure's message set with set_error).
func run(handle uint32, buf []byte) abi.Status {
	if err := abi.DecodeRecordInto(buf, &decoded); err != nil {
		return abi.Status(fail(handle, err.Error()))
	}
	fromABIRecord(&decoded, rec)
	em.handle = handle
	curHandle = handle
	err := processor(rec, em)
	curHandle = 0
	// A record that succeeded with nothing outstanding anywhere, the
	// common case, is decided here: a call costs a Go guest ~40 ns.
	st, msg := abi.StatusOK, ""
	if err != nil || len(calls) > 0 {
		st, msg = decide(handle, err)
	}
	switch {
	case st == abi.StatusPending:
		// The waiting record keeps its buffer, Record and headers' array
		// until it is decided (forget); the next record takes those of a
		// record decided before, or new ones. It keeps its emitter for
		// good: one a continuation kept past its record's decision must
		// not emit for another record.
		pendingOf(handle).kept = kit{buf: inBuf, rec: rec, hdrs: decoded.Headers}
		var k kit
		if n := len(spareKits); n > 0 {
			k, spareKits[n-1] = spareKits[n-1], kit{}
			spareKits = spareKits[:n-1]
		} else {
			k.rec = new(Record)
		}
		inBuf, rec, decoded.Headers = k.buf[:0], k.rec, k.hdrs[:0]
		em = newEmitter()
	case msg != "":
		hostSetError(handle, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	}
	return st
}

//go:wasmimport wasmstream_batch_v1 record_next
func hostRecordNext(status int32, out unsafe.Pointer, outLen uint32, buf unsafe.Pointer, bufLen uint32) int32

var (
	batchOut    []byte // the output list of the batch's record in progress
	batchOutN   int    // the outputs in it
	batchDirect bool   // the record's outputs are emitted one by one (emitList)
	batchHandle uint32 // the batch's record in progress; 0 outside batches
)

// onBatch is the batch entry (ABI.md §10): it takes the batch's records
// one by one with record_next, handing over each one's status and
// outputs, and runs the processor on each as onRecord would.
//
//go:wasmexport wasmstream_on_batch_v1
func onBatch(first, count, maxLen uint32) int32 {
	if cap(inBuf) < int(maxLen) {
		inBuf = make([]byte, maxLen)
	}
	status := abi.StatusOK
	handle := first - 1
	for {
		buf := inBuf[:cap(inBuf)]
		n := handOver(status, hostRecordNext, buf)
		if n <= 0 {
			return 0
		}
		handle++
		if int(n) > len(buf) {
			// After a record that went pending (it kept the buffer).
			inBuf = make([]byte, n)
			if rc := hostRecordRead(handle, bytesPtr(inBuf), uint32(n)); rc < 0 {
				status = abi.Status(fail(handle, "record_read: "+abi.Errno(-rc).Error()))
				continue
			}
		}
		inBuf = inBuf[:n]
		if processor == nil {
			status = abi.Status(fail(handle, noProcessor))
			continue
		}
		batchHandle, batchOutN, batchDirect = handle, 0, false
		status = run(handle, inBuf)
		batchHandle = 0
	}
}

// handOver ends the record in progress with status through pull
// (record_next or completion_next, which also begins the next, writing it
// into buf), handing over its outputs unless it failed (they are discarded
// with it), and empties the list for the next record. It returns what pull
// returned.
func handOver(status abi.Status, pull func(status int32, out unsafe.Pointer, outLen uint32, buf unsafe.Pointer, bufLen uint32) int32, buf []byte) int32 {
	if status != abi.StatusOK && status != abi.StatusPending {
		batchOut = batchOut[:0]
	}
	n := pull(int32(status), bytesPtr(batchOut), uint32(len(batchOut)), bytesPtr(buf), uint32(len(buf)))
	batchOut = batchOut[:0]
	return n
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

//go:wasmimport wasmstream_batch_v1 completion_next
func hostCompletionNext(status int32, out unsafe.Pointer, outLen uint32, buf unsafe.Pointer, bufLen uint32) int32

// compBuf is where completion_next writes a completion's header and result.
var compBuf []byte

// onCompletions is the completions entry (ABI.md §10.1): it takes the
// queued completions one by one with completion_next, handing over each
// one's record status and outputs, and calls each one's continuation as
// onComplete would.
//
//go:wasmexport wasmstream_on_completions_v1
func onCompletions(count, maxLen uint32) int32 {
	if n := max(int(maxLen), abi.CompletionHeaderSize); cap(compBuf) < n {
		compBuf = make([]byte, n)
	}
	buf := compBuf[:cap(compBuf)]
	status := abi.StatusOK
	for {
		n := handOver(status, hostCompletionNext, buf)
		if n <= 0 {
			return 0
		}
		handle, op, size := le32(buf[0:]), le32(buf[4:]), le32(buf[8:])
		result := make([]byte, size) // the continuation may keep what it decodes
		if int(n) <= len(buf) {
			copy(result, buf[abi.CompletionHeaderSize:n])
		} else if rc := hostResultRead(op, bytesPtr(result), size); rc < 0 {
			status = abi.Status(fail(handle, "result_read: "+abi.Errno(-rc).Error()))
			continue
		}
		batchHandle, batchOutN, batchDirect = handle, 0, false
		st, msg := complete(handle, op, result)
		batchHandle = 0
		if msg != "" && st != abi.StatusPending {
			hostSetError(handle, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
		}
		status = st
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
