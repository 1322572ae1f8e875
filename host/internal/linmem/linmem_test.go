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
