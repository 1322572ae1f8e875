//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package avrobin

import "encoding/binary"

// le64 is the little-endian uint64 at the start of b (8 bytes or more).
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
