package partition

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// canTake only looks: a worker whose instance is of an old version is held
// back, and stays as it is, however often it asks. mayTake is the step that
// replaces it (here there is no instance, so nothing is in progress).
func TestCanTakeChangesNothing(t *testing.T) {
	old, cur := &version.Version{}, &version.Version{}
	d := &Deps{Mods: &version.Modules{}, Budget: budget.New(1000, 1<<40, 1<<40)}
	d.Mods.Ver.Store(cur)
	old.Acquire()
	w := &worker{t: &Task{d: d}, ver: old}
	for range 3 {
		if w.canTake() {
			t.Fatal("canTake: a worker of an old version may take records")
		}
	}
	if w.ver != old || old.Refs() != 1 {
		t.Fatalf("canTake changed the worker: version %p (want %p), %d references (want 1)", w.ver, old, old.Refs())
	}
	if !w.mayTake() {
		t.Fatal("mayTake: a worker with nothing in progress is still held back after the upgrade")
	}
	if w.ver != nil || old.Refs() != 0 {
		t.Fatalf("mayTake did not let go of the old version: version %p, %d references", w.ver, old.Refs())
	}
}

// A job is made for every record and lives until its outputs are
// acknowledged: it must stay within 312 bytes, so that a slab of 64
// (newJob) with its allocation's header fits the 20480-byte size class,
// 320 bytes a record (release.go; 448-byte jobs, before what few records
// need moved to jobRare, cost 512). A field added to it goes in the job
// only if every record, or every record of a common mode, needs it; what a
// few records need goes in jobRare, made only for them.
func TestJobSize(t *testing.T) {
	if n := unsafe.Sizeof(job{}); n > 312 {
		t.Fatalf("a job is %d bytes, over its 312 (a slab's 320-byte share)", n)
	}
}

// Making a record's job is one allocation a slab of jobs (jobSlab) and
// nothing else: nothing of the record (its origin, what the guest sees of
// it, its jobRare) is allocated beside it for a record of an input topic. The jobs of a
// slab are distinct and zeroed.
func TestNewJobOneAllocation(t *testing.T) {
	w := &worker{t: &Task{d: &Deps{Role: Primary{}}}}
	r := &kgo.Record{Topic: "in", Partition: 3, Offset: 42, Timestamp: time.UnixMilli(1700000000000), Value: []byte("v")}
	w.newJob(r, nil) // the first slab
	// The fewest of five measures on one P: the runtime (the race
	// detector's, the collector's) and goroutines earlier tests left
	// (their timers) allocate now and then beside the jobs (179 in one
	// measure of a loaded run).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	n, b := uint64(1<<63), uint64(1<<63)
	for range 5 {
		var m0, m1 runtime.MemStats
		w.slabs.jobs = nil // each measure starts a slab
		runtime.ReadMemStats(&m0)
		for range jobSlab * 4 {
			w.newJob(r, nil)
		}
		runtime.ReadMemStats(&m1)
		n, b = min(n, m1.Mallocs-m0.Mallocs), min(b, m1.TotalAlloc-m0.TotalAlloc)
	}
	if n != 4 {
		t.Fatalf("newJob: %d allocations for %d jobs, want 4 (a slab of %d)", n, jobSlab*4, jobSlab)
	}
	if b > 4*jobSlab*320 {
		t.Fatalf("newJob: %d bytes for %d jobs, want at most 320 a job (TestJobSize)", b, jobSlab*4)
	}
	seen := map[*job]bool{}
	for range jobSlab + 1 {
		j, _ := w.newJob(r, nil)
		if seen[j] || j.release.settled || j.outcome.outs != nil || j.attempt != 1 || j.r != r {
			t.Fatalf("newJob returned a job in use or not zeroed: %+v", j)
		}
		seen[j] = true
		j.release.settled, j.outcome.outs = true, []abi.Output{{}}
	}
	j, _ := w.newJob(r, nil)
	if j.rare != nil || j.origin() != ownOrigin(r) {
		t.Fatalf("an input record's origin: %+v (rare fields made: %v), want its own and none", j.origin(), j.rare != nil)
	}
}
