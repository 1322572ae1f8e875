package offsets

import (
	"math/rand"
	"sync"
	"testing"
)

func TestTrackerWatermark(t *testing.T) {
	var tr Tracker
	if _, _, ok := tr.Watermark(); ok {
		t.Fatal("watermark before anything is done")
	}
	for _, o := range []int64{10, 11, 13, 14} { // 12 absent (compacted or a transaction marker)
		tr.Add(o, 1)
	}
	check := func(want int64, ok bool) {
		t.Helper()
		got, _, gok := tr.Watermark()
		if gok != ok || (ok && got != want) {
			t.Fatalf("watermark = %d,%v want %d,%v", got, gok, want, ok)
		}
	}
	tr.Done(11)
	check(0, false) // 10 is not done: nothing may be committed
	tr.Done(10)
	check(12, true)
	tr.Done(14)
	check(12, true) // 13 holds the watermark; 12 does not exist, resuming at 12 is right
	if tr.Pending() != 1 {
		t.Fatalf("pending = %d", tr.Pending())
	}
	tr.Done(13)
	check(15, true)
	if tr.Done(99) {
		t.Fatal("done of an untracked offset")
	}
}

func TestTrackerCommitPoint(t *testing.T) {
	var tr Tracker
	if _, _, _, ok := tr.CommitPoint(); ok {
		t.Fatal("commit point with nothing fetched")
	}
	for o := int64(100); o < 110; o++ {
		tr.Add(o, 3)
	}
	tr.Done(103)
	tr.Done(105)
	off, ep, above, ok := tr.CommitPoint()
	if !ok || off != 100 || ep != -1 || len(above) != 2 || above[0] != 103 || above[1] != 105 {
		t.Fatalf("%d %d %v %v", off, ep, above, ok)
	}
	tr.Done(100)
	tr.Done(101)
	off, ep, above, _ = tr.CommitPoint()
	if off != 102 || ep != 3 || len(above) != 2 {
		t.Fatalf("%d %d %v", off, ep, above)
	}
	if tr.Done(101) {
		t.Fatal("done twice")
	}
	if tr.Pending() != 6 {
		t.Fatalf("pending %d", tr.Pending())
	}
}

// TestTrackerConcurrent marks offsets done in random order from many
// goroutines; the watermark must never pass an offset that is not done.
func TestTrackerConcurrent(t *testing.T) {
	var tr Tracker
	const n = 20000
	for o := int64(0); o < n; o++ {
		tr.Add(o, 0)
	}
	var doneMu sync.Mutex
	DoneSet := make([]bool, n)
	perm := rand.Perm(n)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				o := int64(perm[i])
				doneMu.Lock()
				DoneSet[o] = true
				doneMu.Unlock()
				tr.Done(o)
				if wm, _, ok := tr.Watermark(); ok {
					doneMu.Lock()
					for j := int64(0); j < wm; j++ {
						if !DoneSet[j] {
							doneMu.Unlock()
							t.Errorf("watermark %d passes %d, which is not done", wm, j)
							return
						}
					}
					doneMu.Unlock()
				}
			}
		}(w)
	}
	wg.Wait()
	if wm, _, _ := tr.Watermark(); wm != n {
		t.Fatalf("final watermark %d", wm)
	}
}
