package state

import "testing"

// A run's records read the stream time the records before them in the
// run raise, out of order as they come (the largest, with the
// partition's), as each would read run alone after them; the run's gate
// hears of a timer due by then, whether the partition holds it or a
// record of the run set it, and of none before.
func TestRunClockReadsAndGates(t *testing.T) {
	ts := newTestPartition(t)
	r0 := ts.Begin()
	r0.SetTimer([]byte("k"), 100) // the partition's earliest timer
	ts.CommitAt(0, 10, r0, nil)
	run := ts.BeginRun(func(int) bool { return true })
	stamps := []int64{30, 5, 20, 40}
	want := []int64{10, 30, 30, 30} // what each reads run alone, in order
	var recs []*Record
	for _, s := range stamps {
		recs = append(recs, run.BeginAt(s))
	}
	// As a call runs them: the gate asked before record k, then record k.
	gate := []bool{false, false, true, true} // record 1 sets a timer at 30: due once it is decided
	for k, rs := range recs {
		if got := run.TimerMayBeDue(k); got != gate[k] {
			t.Errorf("the gate before record %d: %v, want %v", k, got, gate[k])
		}
		if got, _ := rs.StreamTime(); got != want[k] {
			t.Errorf("record %d (timestamp %d) read stream time %d, want %d", k, stamps[k], got, want[k])
		}
		if k == 1 {
			rs.SetTimer([]byte("k"), 30)
		}
	}
	for _, rs := range recs {
		rs.EndRun()
	}
	// The spare run the next BeginRun takes starts with a clean clock.
	next := ts.BeginRun(func(int) bool { return true })
	a, b := next.BeginAt(1000), next.BeginAt(0)
	if got, _ := b.StreamTime(); got != 1000 || next.TimerMayBeDue(0) {
		t.Fatalf("the next run: record 1 read %d (want 1000), gate before record 0 %v (want false)", got, next.TimerMayBeDue(0))
	}
	if !next.TimerMayBeDue(1) { // 1000 reaches the partition's timer at 100
		t.Fatal("the next run: no timer due by record 0's timestamp 1000, the partition's at 100")
	}
	a.EndRun()
	b.EndRun()
}
