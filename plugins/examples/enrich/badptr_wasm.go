//go:build wasip1

package main

// rawEmit is emit with its pointer as the plain 32-bit address the host
// receives (what an unsafe.Pointer parameter becomes), so that one far
// outside linear memory can be written without unsafe.
//
//go:wasmimport wasmstream_v1 emit
func rawEmit(handle uint32, ptr uint32, n uint32) int32

// badPointer hands the host a pointer/length pair far outside linear memory.
func badPointer() {
	rawEmit(1, 0xFFFF0000, 0x10000)
}
