package state

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

func dueList(t *testing.T, ts *Partition, at int64) string {
	t.Helper()
	due, err := ts.Due(at, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range due {
		out = append(out, fmt.Sprintf("%s@%d", d.Key, d.At))
	}
	return strings.Join(out, ",")
}

// Timers (ABI.md §4.2) are writes of the record: deduplicated on (key,
// at), not set by a record that fails (its writes dropped), listed by Due
// in (at, key) order once committed (negative at first), through the
// overlay and from the store after a flush, a delete hiding one; they are
// changelog records, and a restore from the changelog alone brings them
// back, with the partition's index of the earliest.
func TestStateTimers(t *testing.T) {
	ts := newTestPartition(t)
	failed := ts.Begin()
	if e := failed.SetTimer([]byte("lost"), 1); e != 0 {
		t.Fatal(e)
	}
	// failed is dropped: never committed.
	r := ts.Begin()
	for _, e := range []abi.Errno{
		r.SetTimer([]byte("b"), 20),
		r.SetTimer([]byte("a"), 20),
		r.SetTimer([]byte("a"), 20), // the same timer
		r.SetTimer([]byte("z"), -5),
		r.SetTimer([]byte("c"), 30),
		r.SetTimer([]byte(""), 20),
	} {
		if e != 0 {
			t.Fatal(e)
		}
	}
	if got := dueList(t, ts, 100); got != "" {
		t.Fatalf("timers of a record not committed are due: %s", got)
	}
	_, outs := ts.CommitAt(1, 10, r, nil)
	if len(outs) != 5 {
		t.Fatalf("%d changelog records for 5 timers", len(outs))
	}
	if got := dueList(t, ts, 19); got != "z@-5" {
		t.Fatalf("due at 19: %s", got)
	}
	if got := dueList(t, ts, 20); got != "z@-5,@20,a@20,b@20" {
		t.Fatalf("due at 20: %s", got)
	}
	if due, _ := ts.Due(20, 2); len(due) != 2 {
		t.Fatalf("Due(20, 2) listed %d", len(due))
	}
	d := ts.Begin()
	if e := d.DeleteTimer([]byte("z"), -5); e != 0 {
		t.Fatal(e)
	}
	if !d.WrittenTimer([]byte("z"), -5) || d.WrittenTimer([]byte("z"), -4) {
		t.Fatal("WrittenTimer")
	}
	_, more := ts.CommitAt(2, -1, d, nil)
	outs = append(outs, more...)
	if got := dueList(t, ts, 25); got != "@20,a@20,b@20" {
		t.Fatalf("after deleting z: %s", got)
	}
	if err := ts.Flush(3); err != nil {
		t.Fatal(err)
	}
	if got := dueList(t, ts, 30); got != "@20,a@20,b@20,c@30" {
		t.Fatalf("from the store: %s", got)
	}
	// A new view over the store knows its earliest timer.
	if v := NewPartition(ts.ps.store, 0, 1, Limits{MaxValueBytes: 100}); v.timers.next != 20 {
		t.Fatalf("a new view's earliest timer: %d", v.timers.next)
	}
	fresh, a := restored(t, asChangelog(outs))
	if a.skipped != 0 {
		t.Fatalf("restore skipped %d", a.skipped)
	}
	if got := dueList(t, NewPartition(fresh, 0, 1, Limits{MaxValueBytes: 100}), math.MaxInt64); got != "@20,a@20,b@20,c@30" {
		t.Fatalf("restored: %s", got)
	}
}

// A timer is checked as a state key (-9 past 1 KiB, -10 of another
// partition) and counted in state.max_bytes with its encoded key: a guest
// setting timers without end is refused at the bound, and Due's index
// stays one number.
func TestStateTimerBounds(t *testing.T) {
	ts := newTestPartition(t)
	r := ts.Begin()
	if e := r.SetTimer(make([]byte, abi.MaxStateKeyBytes+1), 1); e != abi.ErrnoTooLarge {
		t.Fatalf("a 1025-byte key: %v", e)
	}
	parts := NewPartition(ts.ps.store, 0, 4, Limits{MaxValueBytes: 100})
	foreign := []byte("x")
	for KeyPartition(foreign, 4) == 0 {
		foreign = append(foreign, 'x')
	}
	if e := parts.Begin().SetTimer(foreign, 1); e != abi.ErrnoWrongKey {
		t.Fatalf("a key of another partition: %v", e)
	}
	per := int64(len(statestore.TimerKey(nil, []byte("k"), 0)))
	bounded := NewPartition(ts.ps.store, 0, 1, Limits{MaxValueBytes: 100, MaxBytes: 100 * per})
	r = bounded.Begin()
	set := 0
	for at := int64(0); at < 1_000_000; at++ {
		if e := r.SetTimer([]byte("k"), at); e != 0 {
			if e != abi.ErrnoLimit || !strings.Contains(r.OverBound(), "state.max_bytes") {
				t.Fatalf("timer %d: %v %q", at, e, r.OverBound())
			}
			break
		}
		set++
	}
	if set != 100 {
		t.Fatalf("%d timers of %d bytes set under a bound of %d bytes", set, per, 100*per)
	}
	if e := r.DeleteTimer([]byte("k"), 0); e != 0 {
		t.Fatalf("a delete at the bound: %v", e)
	}
}

// A round of many due timers through Due's cache (dueCache): one at a
// time, each fired (deleted) by the next record, while records also
// delete timers the cache holds, set new due ones that sort before it,
// and flushes move timers from the overlay to the store — Due lists the
// first due timer in (at, key) order every time, as a scan would.
func TestDueRoundThroughTheCache(t *testing.T) {
	ts := newTestPartition(t)
	type tm struct {
		key string
		at  int64
	}
	less := func(a, b tm) bool { return a.at < b.at || a.at == b.at && a.key < b.key }
	var model []tm // the due timers, in order
	insert := func(x tm) {
		for i, y := range model {
			if y == x {
				return
			}
			if less(x, y) {
				model = slices.Insert(model, i, x)
				return
			}
		}
		model = append(model, x)
	}
	remove := func(x tm) {
		for i, y := range model {
			if y == x {
				model = append(model[:i], model[i+1:]...)
				return
			}
		}
	}
	const T = 60
	r := ts.Begin()
	for i := range 700 {
		x := tm{fmt.Sprintf("k%03d", i), int64(i % 50)}
		if e := r.SetTimer([]byte(x.key), x.at); e != 0 {
			t.Fatal(e)
		}
		insert(x)
		if e := r.SetTimer([]byte(x.key), 100+int64(i)); e != 0 { // not due
			t.Fatal(e)
		}
	}
	offset := int64(1)
	ts.CommitAt(offset, T, r, nil)
	for step := 0; ; step++ {
		due, err := ts.Due(T, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(model) == 0 {
			if len(due) != 0 {
				t.Fatalf("step %d: %s@%d due, the model has none", step, due[0].Key, due[0].At)
			}
			break
		}
		if len(due) != 1 || string(due[0].Key) != model[0].key || due[0].At != model[0].at {
			t.Fatalf("step %d: Due lists %v, want %s@%d", step, due, model[0].key, model[0].at)
		}
		// The firing: its own timer deleted, sometimes another's, sometimes
		// a new due one set (sorting first: at 0, a key before the rest).
		rec := ts.Begin()
		fired := model[0]
		rec.DeleteTimer([]byte(fired.key), fired.at)
		remove(fired)
		if step%37 == 5 && len(model) > 5 {
			rec.DeleteTimer([]byte(model[5].key), model[5].at)
			remove(model[5])
		}
		if step%53 == 7 {
			x := tm{fmt.Sprintf("a%03d", step), 0}
			rec.SetTimer([]byte(x.key), x.at)
			insert(x)
		}
		offset++
		ts.CommitAt(offset, -1, rec, nil)
		if step%100 == 99 {
			if err := ts.Flush(offset + 1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A round of due timers through DueFirst, as the worker fires them, costs
// one scan while the records between its firings set timers not due yet
// (the next window's), and none at its end; a timer set in the overlay
// alone that a later stream time makes due is found all the same, in
// order, and those not due stay so.
func TestDueRoundScansOnce(t *testing.T) {
	ts := newTestPartition(t)
	const n = 900 // a round of windows closing together, under dueBatch
	r := ts.Begin()
	for i := range n {
		if e := r.SetTimer(fmt.Appendf(nil, "k%04d", i), 50); e != 0 {
			t.Fatal(e)
		}
	}
	offset := int64(1)
	ts.CommitAt(offset, 60, r, nil)
	fire := func(T int64, open bool) (fired []string) {
		t.Helper()
		for {
			tm, ok, err := ts.DueFirst(T)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return fired
			}
			fired = append(fired, fmt.Sprintf("%s@%d", tm.Key, tm.At))
			rec := ts.Begin()
			rec.DeleteTimer(tm.Key, tm.At)
			offset++
			ts.CommitAt(offset, -1, rec, nil)
			if open && len(fired)%3 == 0 { // a record between firings opens a later window
				rec := ts.Begin()
				rec.SetTimer(fmt.Appendf(nil, "n%04d", len(fired)), 200+int64(len(fired)))
				offset++
				ts.CommitAt(offset, -1, rec, nil)
			}
			if len(fired) > 2*n {
				t.Fatalf("more than %d firings", 2*n)
			}
		}
	}
	scans := func() uint64 {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.timers.scans
	}
	fired := fire(60, true)
	if len(fired) != n || fired[0] != "k0000@50" || fired[n-1] != fmt.Sprintf("k%04d@50", n-1) || !slices.IsSorted(fired) {
		t.Fatalf("the round fired %d timers (%v ... ), want k0000@50 ... k%04d@50 in order", len(fired), fired[:min(3, len(fired))], n-1)
	}
	if s := scans(); s != 1 {
		t.Fatalf("the round of %d timers took %d scans, want 1", n, s)
	}
	// A timer set in the overlay alone, due once stream time reaches 70.
	r = ts.Begin()
	r.SetTimer([]byte("late"), 70)
	offset++
	ts.CommitAt(offset, -1, r, nil)
	if got := fire(65, false); len(got) != 0 {
		t.Fatalf("at 65: %v fired, want none", got)
	}
	if got := fire(75, false); !slices.Equal(got, []string{"late@70"}) {
		t.Fatalf("at 75: %v fired, want late@70", got)
	}
	if got := fire(250, false); len(got) != 16 || got[0] != "n0003@203" || got[15] != "n0048@248" {
		t.Fatalf("at 250: %d fired (%v ...), want the 16 windows n0003@203 ... n0048@248", len(got), got[:min(3, len(got))])
	}
	if got := fire(2000, false); len(got) != n/3-16 || got[0] != "n0051@251" || got[len(got)-1] != fmt.Sprintf("n%04d@%d", n, 200+n) {
		t.Fatalf("at 2000: %d fired (%v ...), want the %d windows n0051@251 ... n%04d@%d", len(got), got[:min(3, len(got))], n/3-16, n, 200+n)
	}
}
