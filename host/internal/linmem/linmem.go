// Package linmem allocates the guests' linear memories for wazero
// (experimental.MemoryAllocator): a memory's capacity doubles as it grows,
// up to the memory's maximum. Without it wazero grows a memory by the pages
// a memory.grow asks with Go's append, which gives big slices a quarter
// more room: a Go guest, whose runtime grows its memory a little at a
// time, had its whole memory copied at every quarter of growth, about five
// times its final size allocated in all (the count example's instances:
// ~90 bytes a record over 2,000,000 records); doubling allocates under
// twice the final size. The capacity never passes the memory's maximum,
// which the engine bounds (limits.memory_pages): what a guest can make
// the host hold stays bounded as before. The slack is the Go heap's, as
// the memory is: untouched pages of a fresh allocation are not resident.
package linmem

import "github.com/tetratelabs/wazero/experimental"

// Allocator is the engine's memory allocator: Allocate makes a memory.
var Allocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
	return &Memory{max: maxBytes, hint: capBytes}
})

// Memory is one guest's linear memory.
type Memory struct {
	buf  []byte
	max  uint64 // the memory's maximum, in bytes
	hint uint64 // the capacity wazero suggested for the first allocation
}

// Reallocate makes the memory size bytes long, keeping its contents; nil
// past the maximum (memory.grow then fails in the guest).
func (m *Memory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if c := uint64(cap(m.buf)); size > c {
		c = min(m.max, max(size, 2*c, min(m.hint, m.max)))
		nb := make([]byte, size, c)
		copy(nb, m.buf)
		m.buf = nb
		return nb
	}
	m.buf = m.buf[:size]
	return m.buf
}

// Free lets the collector have the memory.
func (m *Memory) Free() { m.buf = nil }
