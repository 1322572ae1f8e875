//go:build wasip1

package guest

import (
	"errors"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

// timerBuf holds the firing in progress: a firing never goes pending, so
// one buffer serves them all.
var timerBuf []byte

// onTimer is the timer entry (ABI.md §4.2): it reads the firing with
// record_read, runs the timer function with the firing's handle (Handle()
// is it, so window.Bind(Handle()) reads and writes the firing's state) and
// decides it as a record. Every Go module exports it: the host calls it
// only for timers the module set.
//
//go:wasmexport wasmstream_on_timer
func onTimer(handle, n uint32) int32 {
	if timerFunc == nil {
		return fail(handle, noTimerFunc)
	}
	if cap(timerBuf) < int(n) {
		timerBuf = make([]byte, n)
	}
	timerBuf = timerBuf[:n]
	if rc := hostRecordRead(handle, bytesPtr(timerBuf), n); rc < 0 {
		return fail(handle, "record_read: "+abi.Errno(-rc).Error())
	}
	f, err := abi.DecodeTimerFiring(timerBuf)
	if err != nil {
		return fail(handle, err.Error())
	}
	t := Firing{At: f.At, StreamTime: f.StreamTime, Partition: f.Partition, Attempt: f.Attempt, Topic: f.Topic, Key: f.Key}
	curHandle = handle
	err = timerFunc(&t, &emitter{handle: handle})
	curHandle = 0
	if errors.Is(err, Pending) {
		forget(handle) // the host cancels what it started
		err = errFiringPending
	}
	if err == nil {
		return int32(abi.StatusOK)
	}
	msg := err.Error()
	hostSetError(handle, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	return int32(status(err))
}
