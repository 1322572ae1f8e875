package partition

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// newSet is a task set over e's deps (its sink acknowledges at once); the
// test's cleanup stops and closes every task still attached.
func newSet(tb testing.TB, pool bool) (*Set, *engine, *atomic.Bool) {
	tb.Helper()
	e := newEngine(tb, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, autoAck: true, noStart: true})
	stopped := new(atomic.Bool)
	s := NewSet(stopped)
	if pool {
		s = NewPool(stopped)
	}
	s.Start(e.d)
	tb.Cleanup(func() {
		for _, t := range s.Attached() {
			t.Stop()
			t.WaitWorkers(time.Now().Add(10 * time.Second))
			t.Close()
		}
	})
	return s, e, stopped
}

// TestSetDispatch: a poll's records reach their partitions' tasks, a
// partition with no task makes none (its records are left for its owner),
// and a fetch with no records moves its task's high watermark and
// position.
func TestSetDispatch(t *testing.T) {
	t.Parallel()
	s, e, _ := newSet(t, false)
	if want, _ := s.Demand(); !want {
		t.Fatal("no demand without tasks: a new assignment's records come only with a poll")
	}
	s.Assign(map[string][]int32{"in": {0, 1}}, nil)
	s.Dispatch([]Fetched{
		{Topic: "in", Partition: 0, Records: recs(0, "a", "b", "c"), HighWatermark: 3, CaughtUpAt: -1},
		{Topic: "in", Partition: 1, HighWatermark: 50, CaughtUpAt: 40},
		{Topic: "in", Partition: 7, Records: recs(0, "x"), HighWatermark: 1, CaughtUpAt: -1},
	})
	waitFor(t, "partition 0's three records done", func() bool { return len(e.ledger.doneOffsets()) == 3 })
	if n := len(s.Attached()); n != 2 {
		t.Errorf("%d tasks attached, want 2: a dispatch to an unassigned partition made a task", n)
	}
	if g := s.Get(TP{"in", 1}).Gauges(false); g.Lag != 10 {
		t.Errorf("partition 1's lag %d, want 10 (high watermark 50, caught up at 40)", g.Lag)
	}
	if want, pause := s.Demand(); !want || len(pause) != 0 {
		t.Errorf("demand %v, pause %d: want true, none (tasks under their bounds)", want, len(pause))
	}
}

// TestSetPool: a share group's set makes one task at the first records and
// gives it every record, of any partition.
func TestSetPool(t *testing.T) {
	t.Parallel()
	s, e, _ := newSet(t, true)
	s.Dispatch([]Fetched{{Topic: "in", Partition: 3, HighWatermark: 9, CaughtUpAt: 9}})
	if n := len(s.Attached()); n != 0 {
		t.Fatalf("a poll with no records made %d tasks", n)
	}
	a, b := recs(0, "a", "b"), recs(10, "c", "d")
	for _, r := range b {
		r.Partition = 5
	}
	s.Dispatch([]Fetched{{Topic: "in", Partition: 0, Records: a, CaughtUpAt: -1}, {Topic: "in", Partition: 5, Records: b, CaughtUpAt: -1}})
	waitFor(t, "the pool's four records done", func() bool { return len(e.ledger.doneOffsets()) == 4 })
	if ts := s.Attached(); len(ts) != 1 || s.Get(PoolTP) != ts[0] {
		t.Errorf("%d tasks attached, want the one pool task", len(ts))
	}
}

// TestSetDetachRestart: a detached task leaves the set and is never
// restarted; an attached one cut off is replaced by a fresh task at its
// committed offset; once the pipeline stopped, no task is made.
func TestSetDetachRestart(t *testing.T) {
	t.Parallel()
	s, _, stopped := newSet(t, false)
	s.Assign(map[string][]int32{"in": {0, 1}}, nil)
	t0, t1 := s.Get(TP{"in", 0}), s.Get(TP{"in", 1})
	if got := s.Detach(map[string][]int32{"in": {0, 9}}); len(got) != 1 || got[0] != t0 {
		t.Fatalf("Detach returned %v, want partition 0's task alone", got)
	}
	t.Cleanup(func() { t0.Stop(); t0.WaitWorkers(time.Now().Add(10 * time.Second)); t0.Close() })
	s.Restart([]*Task{t0, t1}, []int64{7, 42})
	if s.Get(TP{"in", 0}) != nil {
		t.Error("a detached task was restarted")
	}
	nt := s.Get(TP{"in", 1})
	if nt == t1 || nt == nil || nt.Committed.Load() != 42 {
		t.Errorf("partition 1 not restarted at 42 (same task %v, committed %d)", nt == t1, nt.Committed.Load())
	}
	t1.Stop()
	t1.WaitWorkers(time.Now().Add(10 * time.Second))
	t1.Close()
	stopped.Store(true)
	s.Assign(map[string][]int32{"in": {2}}, nil)
	s.Restart([]*Task{nt}, []int64{50})
	if s.Get(TP{"in", 2}) != nil || s.Get(TP{"in", 1}) != nt {
		t.Error("a task was made after the pipeline stopped")
	}
	s.DetachAll()
	if n := len(s.Attached()); n != 0 {
		t.Errorf("%d tasks attached after DetachAll", n)
	}
	nt.Stop()
	nt.WaitWorkers(time.Now().Add(10 * time.Second))
	nt.Close()
}
