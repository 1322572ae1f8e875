package linmem

import (
	"bytes"
	"runtime"
	"testing"
)

// A memory grown a page at a time keeps its contents, never passes its
// maximum, and allocates under twice its final size in all (append's
// quarter more room each time allocated about five times).
func TestGrowsByDoubling(t *testing.T) {
	const page, pages = 64 << 10, 256
	m := Allocator.Allocate(page, pages*page).(*Memory)
	buf := m.Reallocate(page)
	buf[0], buf[page-1] = 7, 9
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for n := uint64(2); n <= pages; n++ {
		buf = m.Reallocate(n * page)
		if uint64(len(buf)) != n*page || uint64(cap(buf)) > pages*page {
			t.Fatalf("%d pages: len %d, cap %d (max %d)", n, len(buf), cap(buf), pages*page)
		}
		buf[len(buf)-1] = byte(n)
	}
	runtime.ReadMemStats(&ms1)
	if buf[0] != 7 || buf[page-1] != 9 || buf[2*page-1] != 2 {
		t.Fatal("growing lost the memory's contents")
	}
	if got, limit := ms1.TotalAlloc-ms0.TotalAlloc, uint64(2*pages*page); got > limit {
		t.Fatalf("growing to %d bytes allocated %d, want at most %d", pages*page, got, limit)
	}
	if m.Reallocate(pages*page+1) != nil {
		t.Fatal("a memory grew past its maximum")
	}
	if got := m.Reallocate(page); len(got) != page || !bytes.Equal(got[:1], []byte{7}) {
		t.Fatal("shrinking the length lost the contents")
	}
	m.Free()
	if m.buf != nil {
		t.Fatal("Free kept the memory")
	}
}

// A family's next memory starts with room for twice the length its first
// one grew to: grown a page at a time to the same length, it
// copies nothing (its memory is the one it started with), where the first
// one allocated under twice it; the room never passes MaxHint nor the
// memory's own maximum, and a memory outside the family starts with
// wazero's suggestion.
func TestFamilyStartsAtItsGrownSize(t *testing.T) {
	const page, pages = 64 << 10, 64
	f := NewFamily()
	first := f.Allocator().Allocate(page, 1<<30).(*Memory)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for n := 1; n <= pages; n++ {
		first.Reallocate(uint64(n * page))
	}
	runtime.ReadMemStats(&ms1)
	if got := ms1.TotalAlloc - ms0.TotalAlloc; got > 2*pages*page {
		t.Fatalf("the first memory allocated %d bytes growing to %d", got, pages*page)
	}
	second := f.Allocator().Allocate(page, 1<<30).(*Memory)
	at := &second.Reallocate(page)[0]
	for n := 2; n <= pages; n++ {
		if buf := second.Reallocate(uint64(n * page)); len(buf) != n*page || &buf[0] != at {
			t.Fatalf("the second memory was copied growing to %d pages (room %d)", n, cap(buf))
		}
	}
	if cap(second.buf) != 2*pages*page {
		t.Fatalf("the second memory's room is %d, want %d", cap(second.buf), 2*pages*page)
	}
	if small := f.Allocator().Allocate(page, 4*page).(*Memory); cap(small.Reallocate(page)) != 4*page {
		t.Fatalf("a memory of the family with a maximum of 4 pages got room for %d bytes", cap(small.buf))
	}
	// A later memory that grows far leaves the room as the first set it:
	// an instance borrowed for a burst does not make every later one hold
	// room it never uses (TestPoolSettlesRealKafka's resident memory).
	big := f.Allocator().Allocate(page, 1<<30).(*Memory)
	big.Reallocate(8 * pages * page)
	if next := f.Allocator().Allocate(page, 1<<30).(*Memory); cap(next.Reallocate(page)) != 2*pages*page {
		t.Fatalf("after a later memory of %d bytes the next one's room is %d, want the first's twice (%d)", 8*pages*page, cap(next.buf), 2*pages*page)
	}
	// A first memory that grew past MaxHint gives room for MaxHint.
	g := NewFamily()
	g.Allocator().Allocate(page, 1<<30).(*Memory).Reallocate(2 * MaxHint)
	if next := g.Allocator().Allocate(page, 1<<30).(*Memory); cap(next.Reallocate(page)) != MaxHint {
		t.Fatalf("after a first memory of %d bytes the next one's room is %d, want MaxHint (%d)", 2*MaxHint, cap(next.buf), MaxHint)
	}
	if other := Allocator.Allocate(page, 1<<30).(*Memory); cap(other.Reallocate(page)) != page {
		t.Fatalf("a memory of no family got room for %d bytes", cap(other.buf))
	}
	var none *Family
	if none.Allocator() == nil {
		t.Fatal("a nil family has no allocator")
	}
}
