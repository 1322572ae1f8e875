//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

//go:wasmimport wasmstream_v1 state_get
func hostStateGet(handle uint32, key unsafe.Pointer, keyLen uint32, buf unsafe.Pointer, bufLen uint32) int32

//go:wasmimport wasmstream_v1 state_put
func hostStatePut(handle uint32, key unsafe.Pointer, keyLen uint32, val unsafe.Pointer, valLen uint32) int32

//go:wasmimport wasmstream_v1 state_delete
func hostStateDelete(handle uint32, key unsafe.Pointer, keyLen uint32) int32

//go:wasmimport wasmstream_v1 state_scan
func hostStateScan(handle uint32, prefix unsafe.Pointer, prefixLen uint32, after unsafe.Pointer, afterLen uint32, buf unsafe.Pointer, bufLen uint32) int32

// Buffers reused by every call: an instance runs one call at a time. A
// value state_get returns is a copy, the caller's.
var getBuf, scanBuf []byte

func stateGet(handle uint32, key []byte) ([]byte, error) {
	if len(getBuf) == 0 {
		getBuf = make([]byte, 1024)
	}
	for {
		rc := hostStateGet(handle, bytesPtr(key), uint32(len(key)), bytesPtr(getBuf), uint32(len(getBuf)))
		if rc < 0 {
			return nil, abi.Errno(-rc)
		}
		if int(rc) <= len(getBuf) {
			return append([]byte{}, getBuf[:rc]...), nil
		}
		getBuf = make([]byte, rc) // the value is larger: ask again with its size
	}
}

func statePut(handle uint32, key, value []byte) error {
	if rc := hostStatePut(handle, bytesPtr(key), uint32(len(key)), bytesPtr(value), uint32(len(value))); rc < 0 {
		return abi.Errno(-rc)
	}
	return nil
}

func stateDelete(handle uint32, key []byte) error {
	if rc := hostStateDelete(handle, bytesPtr(key), uint32(len(key))); rc < 0 {
		return abi.Errno(-rc)
	}
	return nil
}

func stateScan(handle uint32, prefix []byte, fn func(key, value []byte) bool) error {
	if len(scanBuf) == 0 {
		scanBuf = make([]byte, 64<<10)
	}
	var after []byte
	for {
		buf := scanBuf
		rc := hostStateScan(handle, bytesPtr(prefix), uint32(len(prefix)), bytesPtr(after), uint32(len(after)), bytesPtr(buf), uint32(len(buf)))
		if rc == -int32(abi.ErrnoBufTooSmall) && len(buf) < 8<<20 {
			scanBuf = make([]byte, 2*len(buf))
			continue
		}
		if rc < 0 {
			return abi.Errno(-rc)
		}
		if rc == 0 {
			return nil
		}
		stop := false
		var last []byte
		if err := abi.DecodeStateEntries(buf[:rc], func(k, v []byte) bool {
			last = k
			if !fn(k, v) {
				stop = true
			}
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
