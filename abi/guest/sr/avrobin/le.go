//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package avrobin

import "unsafe"

// le64 is the little-endian uint64 at the start of b (8 bytes or more):
// one load on a little-endian machine, where binary.LittleEndian.Uint64's
// eight would cost Double its inlining.
func le64(b []byte) uint64 { return *(*uint64)(unsafe.Pointer(unsafe.SliceData(b))) }
