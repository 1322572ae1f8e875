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
//
// The memories of one module's instances are a Family: a new instance's
// memory starts with room for twice the length its module's first memory
// (the load check's) grew to (up to MaxHint), so that an instance that
// grows as it did, or a little further, copies nothing on its way (the
// count example's eight instances start at their module's load check's
// length and grow a little past it: one doubling each, a sixth of what a
// record allocated over a run of 400,000 records). The first memory alone
// sets the room: a later instance that grew far (a pool's borrowed
// instance under a burst of lookups) would otherwise make every instance
// after it hold room it never uses, which the collector counts as live and
// lets the heap grow by as much again (TestPoolSettlesRealKafka's resident
// memory rose by a fifth).
package linmem

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// Allocator is a memory allocator of no family: each memory starts with
// the room wazero suggests.
var Allocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
	return &Memory{max: maxBytes, hint: capBytes}
})

// MaxHint bounds the room a family gives a new memory at its first
// allocation: a module whose load check grew far (a large table built at
// start) does not make every instance hold twice that before it needs it.
// Past it a memory doubles as it grows; a doubling of 16 MiB or more is
// rare beside the records it serves.
const MaxHint = 16 << 20

// A Family is the memories of one module's instances (NewFamily); safe
// for use by concurrent instantiations.
type Family struct {
	grown atomic.Uint64 // the largest length the family's first memory reached, in bytes
	begun atomic.Bool   // the first memory is made
	alloc experimental.MemoryAllocator
}

// NewFamily makes a family of memories, none yet.
func NewFamily() *Family {
	f := new(Family)
	f.alloc = experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		m := &Memory{max: maxBytes, hint: max(capBytes, min(2*f.grown.Load(), MaxHint))}
		if f.begun.CompareAndSwap(false, true) {
			m.fam = f // the first: it tells the family how far it grows
		}
		return m
	})
	return f
}

// Allocator is the family's allocator: a memory it makes starts with room
// for twice the largest length the family's first memory reached (at most
// MaxHint and the memory's maximum); the first tells the family how far
// it grows.
// A nil Family's is Allocator.
func (f *Family) Allocator() experimental.MemoryAllocator {
	if f == nil {
		return Allocator
	}
	return f.alloc
}

// grew notes that the family's first memory reached size bytes.
func (f *Family) grew(size uint64) {
	for {
		g := f.grown.Load()
		if size <= g || f.grown.CompareAndSwap(g, size) {
			return
		}
	}
}

// Memory is one guest's linear memory.
type Memory struct {
	buf  []byte
	max  uint64  // the memory's maximum, in bytes
	hint uint64  // the capacity of the first allocation: wazero's suggestion, or the family's
	fam  *Family // the family it is the first memory of; nil: none (or not the first)
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
		if m.fam != nil {
			m.fam.grew(size)
		}
		return nb
	}
	m.buf = m.buf[:size]
	if m.fam != nil && size > 0 {
		m.fam.grew(size)
	}
	return m.buf
}

// Free lets the collector have the memory.
func (m *Memory) Free() { m.buf = nil }
