package offsets

import (
	"math/rand"
	"slices"
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

// TestTrackerWrapped marks offsets done out of order while the tracker's
// ring has wrapped around its end, and while it grows wrapped.
func TestTrackerWrapped(t *testing.T) {
	var tr Tracker
	for o := int64(0); o < 16; o++ {
		tr.Add(o, 1) // the ring grows to 16 entries
	}
	for o := int64(0); o < 10; o++ {
		tr.Done(o) // the front moves to entry 10
	}
	for o := int64(16); o < 26; o++ {
		tr.Add(o, 2) // entries 0..9 of the ring: wrapped, full
	}
	for _, o := range []int64{17, 15, 21, 12} {
		if !tr.Done(o) {
			t.Fatalf("done %d: not tracked", o)
		}
	}
	if tr.Done(15) || tr.Done(9) || tr.Done(26) {
		t.Fatal("done twice, below the watermark or above what was added")
	}
	off, ep, above, ok := tr.CommitPoint()
	if !ok || off != 10 || ep != 1 || !slices.Equal(above, []int64{12, 15, 17, 21}) {
		t.Fatalf("commit point %d %d %v %v", off, ep, above, ok)
	}
	// Grow while wrapped: the order survives.
	for o := int64(30); o < 40; o++ {
		tr.Add(o, 3)
	}
	tr.Done(33)
	for _, o := range []int64{10, 11, 13, 14} {
		tr.Done(o)
	}
	off, ep, above, _ = tr.CommitPoint()
	if off != 16 || ep != 1 || !slices.Equal(above, []int64{17, 21, 33}) {
		t.Fatalf("commit point %d %d %v", off, ep, above)
	}
	if tr.Pending() != 36-19 {
		t.Fatalf("pending %d", tr.Pending())
	}
	for o := int64(16); o < 26; o++ {
		tr.Done(o)
	}
	off, ep, above, _ = tr.CommitPoint()
	if off != 30 || ep != 2 || !slices.Equal(above, []int64{33}) {
		t.Fatalf("commit point %d %d %v", off, ep, above)
	}
}

// TestTrackerAgainstModel adds offsets with gaps in bursts and marks them
// done in random order, checking the watermark, the commit point and the
// pending count against a plain map; the live set rises to thousands and
// falls back, so the ring wraps, grows and shrinks.
func TestTrackerAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var tr Tracker
	added := []int64{} // not done, in offset order
	doneAbove := map[int64]bool{}
	var next int64
	var wm int64 = -1 // -1: nothing done yet
	var wmEpoch int32
	epochOf := map[int64]int32{}
	for step := 0; step < 600; step++ {
		if rng.Intn(2) == 0 {
			for k := rng.Intn(1 + rng.Intn(2000)); k > 0; k-- {
				next += 1 + int64(rng.Intn(3)) // gaps: compacted offsets, markers
				ep := int32(next / 1000)
				tr.Add(next, ep)
				epochOf[next] = ep
				added = append(added, next)
			}
		}
		for k := rng.Intn(1 + rng.Intn(2000)); k > 0 && len(added) > 0; k-- {
			// Mostly near the front, sometimes anywhere.
			i := rng.Intn(min(len(added), 64))
			if rng.Intn(8) == 0 {
				i = rng.Intn(len(added))
			}
			o := added[i]
			if doneAbove[o] {
				if tr.Done(o) {
					t.Fatalf("step %d: done %d twice", step, o)
				}
				continue
			}
			if !tr.Done(o) {
				t.Fatalf("step %d: done %d: not tracked", step, o)
			}
			doneAbove[o] = true
			for len(added) > 0 && doneAbove[added[0]] {
				delete(doneAbove, added[0])
				wm, wmEpoch = added[0]+1, epochOf[added[0]]
				added = added[1:]
			}
		}
		if tr.Pending() != len(added)-len(doneAbove) {
			t.Fatalf("step %d: pending %d, want %d", step, tr.Pending(), len(added)-len(doneAbove))
		}
		got, gotEp, ok := tr.Watermark()
		if ok != (wm >= 0) || ok && (got != wm || gotEp != wmEpoch) {
			t.Fatalf("step %d: watermark %d %d %v, want %d %d", step, got, gotEp, ok, wm, wmEpoch)
		}
		if step%50 != 0 {
			continue
		}
		off, ep, above, ok := tr.CommitPoint()
		switch {
		case len(added) > 0:
			var want []int64
			for _, o := range added {
				if doneAbove[o] {
					want = append(want, o)
				}
			}
			wantEp := int32(-1)
			if wm >= 0 {
				wantEp = wmEpoch
			}
			if !ok || off != added[0] || ep != wantEp || !slices.Equal(above, want) {
				t.Fatalf("step %d: commit point %d %d %d done above %v, want %d %d %d", step, off, ep, len(above), ok, added[0], wantEp, len(want))
			}
		case wm >= 0:
			if !ok || off != wm || ep != wmEpoch || above != nil {
				t.Fatalf("step %d: commit point %d %d %v %v, want %d %d", step, off, ep, above, ok, wm, wmEpoch)
			}
		}
	}
}

// TestTrackerLoadThenTrickle: 40,000 records fetched ahead, then a trickle
// of a few at a time (the ring shrinks after a turn of it), one slow record
// holding the watermark throughout.
func TestTrackerLoadThenTrickle(t *testing.T) {
	var tr Tracker
	var o int64
	for ; o < 40000; o++ {
		tr.Add(o, 0)
	}
	for d := int64(1); d < 40000; d++ {
		tr.Done(d) // 0, the slow one, holds the watermark
	}
	if off, _, above, _ := tr.CommitPoint(); off != 0 || len(above) != 39999 || above[0] != 1 {
		t.Fatalf("commit point %d, %d done above", off, len(above))
	}
	tr.Done(0)
	for ; o < 200000; o += 4 {
		for k := int64(0); k < 4; k++ {
			tr.Add(o+k, 1)
		}
		tr.Done(o + 2)
		tr.Done(o - 4) // the previous step's first, done late
		tr.Done(o + 1)
		tr.Done(o + 3)
		if o%4096 == 0 {
			off, ep, above, ok := tr.CommitPoint()
			if !ok || off != o || ep != 1 || !slices.Equal(above, []int64{o + 1, o + 2, o + 3}) {
				t.Fatalf("at %d: commit point %d %d, %d done above, %v", o, off, ep, len(above), ok)
			}
		}
	}
	if tr.Pending() != 1 {
		t.Fatalf("pending %d", tr.Pending())
	}
}

// TestTrackerSteadyAllocatesNothing: under a partition task's load (see
// steadyTracker) a warm tracker allocates nothing a record.
func TestTrackerSteadyAllocatesNothing(t *testing.T) {
	var tr Tracker
	s := newSteadyTracker(&tr)
	for s.added < 200000 {
		s.step()
	}
	if allocs := testing.AllocsPerRun(200, func() { s.step() }); allocs != 0 {
		t.Fatalf("%v allocations per step", allocs)
	}
}
