//go:build wasip1

package window

import (
	"encoding/binary"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

// The bindings of ABI.md §4.2: the two-part state keys, stream_time and
// the timers. Go imports a wasmimport function only when the module calls
// it, so a module that uses Get, Put, Delete, Scan and StreamTime alone
// (host/testdata/eventtime) imports no timer function; one that sets
// timers — the windows of this package do — must export
// wasmstream_on_timer too (the host refuses it at load otherwise). Bind
// takes the handle of the call in progress, which a processor of package
// guest reads with guest.Handle().

//go:wasmimport wasmstream_v1 state_get2
func hostStateGet2(handle uint32, key unsafe.Pointer, keyLen uint32, sub unsafe.Pointer, subLen uint32, buf unsafe.Pointer, bufLen uint32) int32

//go:wasmimport wasmstream_v1 state_put2
func hostStatePut2(handle uint32, key unsafe.Pointer, keyLen uint32, sub unsafe.Pointer, subLen uint32, val unsafe.Pointer, valLen uint32) int32

//go:wasmimport wasmstream_v1 state_delete2
func hostStateDelete2(handle uint32, key unsafe.Pointer, keyLen uint32, sub unsafe.Pointer, subLen uint32) int32

//go:wasmimport wasmstream_v1 state_scan2
func hostStateScan2(handle uint32, key unsafe.Pointer, keyLen uint32, prefix unsafe.Pointer, prefixLen uint32, after unsafe.Pointer, afterLen uint32, buf unsafe.Pointer, bufLen uint32) int32

//go:wasmimport wasmstream_v1 stream_time
func hostStreamTime(handle uint32, out unsafe.Pointer) int32

//go:wasmimport wasmstream_v1 timer_set
func hostTimerSet(handle uint32, key unsafe.Pointer, keyLen uint32, at int64) int32

//go:wasmimport wasmstream_v1 timer_delete
func hostTimerDelete(handle uint32, key unsafe.Pointer, keyLen uint32, at int64) int32

// Bind returns the Host of the call handle: a record's (wasmstream_on_record,
// or a completion of it) or a timer firing's (wasmstream_on_timer). It is
// valid only during that call.
func Bind(handle uint32) Host { return wasmHost(handle) }

type wasmHost uint32

// Buffers reused by every call: an instance runs one call at a time
// (ABI.md §2). A value Get returns is a copy, the caller's.
var getBuf, scanBuf []byte

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func errno(rc int32) error {
	if rc < 0 {
		return abi.Errno(-rc)
	}
	return nil
}

func (h wasmHost) StreamTime() (int64, error) {
	var out [8]byte
	if err := errno(hostStreamTime(uint32(h), unsafe.Pointer(&out[0]))); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(out[:])), nil
}

func (h wasmHost) Get(key, sub []byte) ([]byte, bool, error) {
	if len(getBuf) == 0 {
		getBuf = make([]byte, 1024)
	}
	for {
		rc := hostStateGet2(uint32(h), ptr(key), uint32(len(key)), ptr(sub), uint32(len(sub)), ptr(getBuf), uint32(len(getBuf)))
		if rc == -int32(abi.ErrnoNotFound) {
			return nil, false, nil
		}
		if rc < 0 {
			return nil, false, abi.Errno(-rc)
		}
		if int(rc) <= len(getBuf) {
			return append([]byte{}, getBuf[:rc]...), true, nil
		}
		getBuf = make([]byte, rc) // the value is larger: ask again with its size
	}
}

func (h wasmHost) Put(key, sub, value []byte) error {
	return errno(hostStatePut2(uint32(h), ptr(key), uint32(len(key)), ptr(sub), uint32(len(sub)), ptr(value), uint32(len(value))))
}

func (h wasmHost) Delete(key, sub []byte) error {
	return errno(hostStateDelete2(uint32(h), ptr(key), uint32(len(key)), ptr(sub), uint32(len(sub))))
}

func (h wasmHost) Scan(key, prefix []byte, fn func(sub, value []byte) bool) error {
	if len(scanBuf) == 0 {
		scanBuf = make([]byte, 64<<10)
	}
	var after []byte
	for {
		buf := scanBuf
		rc := hostStateScan2(uint32(h), ptr(key), uint32(len(key)), ptr(prefix), uint32(len(prefix)), ptr(after), uint32(len(after)), ptr(buf), uint32(len(buf)))
		if rc == -int32(abi.ErrnoBufTooSmall) && len(buf) < 8<<20 {
			scanBuf = make([]byte, 2*len(buf))
			continue
		}
		if rc <= 0 {
			return errno(rc)
		}
		stop := false
		var last []byte
		if err := abi.DecodeStateEntries(buf[:rc], func(s, v []byte) bool {
			last = s
			stop = !fn(s, v)
			return !stop
		}); err != nil {
			return err
		}
		if stop {
			return nil
		}
		after = append(after[:0], last...)
	}
}

func (h wasmHost) SetTimer(key []byte, at int64) error {
	return errno(hostTimerSet(uint32(h), ptr(key), uint32(len(key)), at))
}

func (h wasmHost) DeleteTimer(key []byte, at int64) error {
	return errno(hostTimerDelete(uint32(h), ptr(key), uint32(len(key)), at))
}
