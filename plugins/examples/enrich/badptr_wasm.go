//go:build wasip1

package main

import "unsafe"

//go:wasmimport wasmstream_v1 emit
func rawEmit(handle uint32, ptr unsafe.Pointer, n uint32) int32

// badPointer hands the host a pointer/length pair far outside linear memory.
func badPointer() {
	rawEmit(1, unsafe.Pointer(uintptr(0xFFFF0000)), 0x10000)
}
