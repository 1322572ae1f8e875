package host

import (
	"context"
	"runtime"
	"testing"
)

// An instance's memory grows by doubling its capacity (host/internal/
// linmem), not by the pages asked: a Go guest's memory grown a page at a
// time to eight times its start allocates less than twice its final size
// in all (wazero's own growth, Go's append, allocated about five times the
// growth and copied the memory as often). Eight times: its room starts at
// a power of two of its start (twice what its module's earlier instances
// reached, linmem.Family), so the doublings end exactly there; growing
// just past a doubling, doubling may allocate up to four times the final
// size.
func TestInstanceMemoryGrowsByDoubling(t *testing.T) {
	m := loadShared(t, guest(t, "plugins/examples/uppercase"), Limits{})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	mem := in.mod.Memory()
	start := uint64(mem.Size())
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for uint64(mem.Size()) < 8*start {
		if _, ok := mem.Grow(1); !ok {
			t.Fatalf("memory.grow failed at %d bytes", mem.Size())
		}
	}
	runtime.ReadMemStats(&ms1)
	final := uint64(mem.Size())
	got := ms1.TotalAlloc - ms0.TotalAlloc
	t.Logf("grown from %d to %d bytes: %d allocated (%.2f× the final size)", start, final, got, float64(got)/float64(final))
	if got > 2*final {
		t.Fatalf("growing the memory from %d to %d bytes allocated %d: more than twice its final size", start, final, got)
	}
}
