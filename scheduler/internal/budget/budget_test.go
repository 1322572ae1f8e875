package budget

import (
	"sync"
	"sync/atomic"
	"testing"
)

// AdmitAsyncN reserves what the bound leaves, counting both operations in
// flight and reservations not yet given back, and AdmittedN gives them
// back; without a bound it admits every record.
func TestAdmitAsyncN(t *testing.T) {
	var ops atomic.Int64
	b := New(1, 1<<30, 100)
	if got := b.AdmitAsyncN(7); got != 7 {
		t.Fatalf("no bound: admitted %d of 7", got)
	}
	b.AdmittedN(7)
	b.LimitAsync(10, ops.Load)
	if got := b.AdmitAsyncN(4); got != 4 {
		t.Fatalf("admitted %d of 4 (bound 10, none in flight)", got)
	}
	if !b.AdmitAsync() {
		t.Fatal("AdmitAsync refused with 5 of 10 reserved")
	}
	ops.Store(3)
	if got := b.AdmitAsyncN(5); got != 2 {
		t.Fatalf("admitted %d, want 2 (3 in flight, 5 reserved, bound 10)", got)
	}
	if got := b.AdmitAsyncN(1); got != 0 || b.AdmitAsync() {
		t.Fatalf("admitted %d at the bound", got)
	}
	b.AdmittedN(2)
	b.Admitted()
	if got := b.AdmitAsyncN(9); got != 3 {
		t.Fatalf("admitted %d, want 3 after 3 given back", got)
	}
	b.AdmittedN(3)
	b.AdmittedN(4)
	ops.Store(0)
	if got := b.AdmitAsyncN(12); got != 10 {
		t.Fatalf("admitted %d, want the whole bound 10 once everything was given back", got)
	}
	b.AdmittedN(10)
	if got := b.AdmitAsyncN(0); got != 0 {
		t.Fatalf("admitted %d of 0", got)
	}
}

// Concurrent admissions never reserve past the bound: each admitter that
// holds k reservations turns them into k operations (as a run's records
// start theirs), gives the reservations back, and later completes the
// operations; what is reserved or in flight, each counted once, never
// exceeds the bound.
func TestAdmitAsyncNConcurrent(t *testing.T) {
	const bound = 16
	var ops, out atomic.Int64 // out: reserved and not started, or started and not completed
	b := New(1, 1<<30, 100)
	b.LimitAsync(bound, ops.Load)
	var over atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := b.AdmitAsyncN(1 + i%5)
				if k == 0 {
					continue
				}
				if n := out.Add(int64(k)); n > bound {
					over.Store(n)
				}
				ops.Add(int64(k)) // the run's records started theirs
				b.AdmittedN(k)    // its call returned
				out.Add(-int64(k))
				ops.Add(-int64(k)) // completed
			}
		}()
	}
	wg.Wait()
	if n := over.Load(); n != 0 {
		t.Fatalf("%d reserved or in flight, past the bound %d", n, bound)
	}
	if got := b.AdmitAsyncN(bound + 1); got != bound {
		t.Fatalf("after every reservation was given back: admitted %d, want %d", got, bound)
	}
}
