package avrobin

import "unsafe"

// An allocation costs a Go guest far more than the bytes it copies (a
// record's two small allocations cost as much as decoding its seven
// fields, BENCHMARKS.md), so the strings the generated decoders read are
// carved out of shared chunks: one allocation per stringChunk bytes of
// strings, and one per ptrChunk strings in a union with null, instead of
// one per string.
//
// A chunk is only ever appended to within its capacity and never
// rewritten, so a string handed out never changes; a chunk stays alive as
// long as any string in it does (a string kept for long keeps its chunk:
// at most stringChunk bytes, as a substring keeps its whole string).
const (
	stringChunk = 4096
	ptrChunk    = 64
	// maxShared is the longest string carved from a chunk: longer ones
	// get their own allocation, whose cost their copy outweighs anyway.
	maxShared = stringChunk / 8
)

type arena struct {
	bytes []byte   // the chunk strings are copied into
	strs  []string // the chunk StringPtr's strings live in
}

// string returns a copy of p.
func (a *arena) string(p []byte) string {
	if len(p) > maxShared {
		return string(p)
	}
	if cap(a.bytes)-len(a.bytes) < len(p) {
		a.bytes = make([]byte, 0, stringChunk)
	}
	n := len(a.bytes)
	a.bytes = append(a.bytes, p...)
	return unsafe.String(&a.bytes[n], len(p))
}

// pointer returns a pointer to a string holding s.
func (a *arena) pointer(s string) *string {
	if len(a.strs) == cap(a.strs) {
		a.strs = make([]string, 0, ptrChunk)
	}
	a.strs = append(a.strs, s)
	return &a.strs[len(a.strs)-1]
}
