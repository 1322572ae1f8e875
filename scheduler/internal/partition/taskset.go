// A pipeline's tasks by partition: the task map the source fills as the
// group's membership changes and dispatches to, and the committer reads and
// takes from (DESIGN.md, "Seams: source, ledger, sink, committer").

package partition

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
)

// Set is a pipeline's tasks, one per assigned partition (or, for a share
// group, one pool for every record: NewPool). It is handed whole to the
// pipeline's source and committer instead of funcs over the pipeline's
// map. Safe for concurrent use; its mutex is Set.mu in the lock order
// (DESIGN.md, "Lock order"): taken after commitMu, before task.mu, and
// released before a task's enqueue (which may take the release order's
// lock, outer to it).
type Set struct {
	mu    sync.Mutex
	tasks map[TP]*Task
	// d is what every task is made from: set by Start, before the source
	// runs (so before any task is made).
	d *Deps
	// stopped is the pipeline's: no task is made once it is set.
	stopped *atomic.Bool
	// pool: every record goes to one task (PoolTP), made at the first
	// dispatch (consume: share).
	pool bool
	// batches is Dispatch's, reused: only the poll loop dispatches.
	batches []taskBatch
}

// PoolTP is the key of a share group's one task (its metrics report topic
// "*", partition -1): a share group hands out records of any partition in
// any mix, and ordering: none binds none of them to a partition, so one
// pool of instances takes them all (instances sizes it).
var PoolTP = TP{Topic: "*", Partition: -1}

// NewSet is the task map of a consumer group's pipeline, which makes no
// task once stopped is set.
func NewSet(stopped *atomic.Bool) *Set {
	return &Set{tasks: map[TP]*Task{}, stopped: stopped}
}

// NewPool is the task map of a share group's pipeline: one task, made at
// the first dispatch, takes every record.
func NewPool(stopped *atomic.Bool) *Set {
	s := NewSet(stopped)
	s.pool = true
	return s
}

// Start gives the set what its tasks are made from. Called once, before
// the source runs.
func (s *Set) Start(d *Deps) { s.d = d }

// Assign makes and starts the tasks of newly assigned partitions (none
// once the pipeline stopped); skips are the offsets a previous owner
// reported done, by partition.
func (s *Set) Assign(assigned map[string][]int32, skips map[TP]*offsets.DoneSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped.Load() {
		return
	}
	for topic, parts := range assigned {
		for _, part := range parts {
			k := TP{Topic: topic, Partition: part}
			if s.tasks[k] != nil {
				continue
			}
			t := NewTask(s.d, topic, part, skips[k])
			s.tasks[k] = t
			t.Start()
			s.d.Log.Debug("partition assigned", "topic", topic, "partition", part, "skip", skips[k].Count())
		}
	}
}

// Policy is the ledger's policy for the set's tasks (whether done offsets
// are read back at an assignment: LedgerPolicy.DoneOffsets).
func (s *Set) Policy() LedgerPolicy { return s.d.Ledger.Policy() }

// Attached returns the tasks attached now.
func (s *Set) Attached() []*Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		out = append(out, t)
	}
	return out
}

// Get is the task of a partition (nil: none attached).
func (s *Set) Get(k TP) *Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasks[k]
}

// Detach takes the tasks of parts out of the set and returns them.
func (s *Set) Detach(parts map[string][]int32) []*Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Task
	for topic, ps := range parts {
		for _, part := range ps {
			k := TP{Topic: topic, Partition: part}
			if t := s.tasks[k]; t != nil {
				out = append(out, t)
				delete(s.tasks, k)
			}
		}
	}
	return out
}

// DetachAll removes every task (Pipeline.Stop has them from Attached).
func (s *Set) DetachAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tasks)
}

// Restart replaces each of old still attached, unless the pipeline
// stopped, with a fresh task for its partition committed at committed[i]
// (the tasks an aborted transaction cut off).
func (s *Set) Restart(old []*Task, committed []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range old {
		k := TP{Topic: t.Topic, Partition: t.Partition}
		if s.tasks[k] != t || s.stopped.Load() {
			continue
		}
		nt := NewTask(s.d, t.Topic, t.Partition, nil)
		nt.Committed.Store(committed[i])
		s.tasks[k] = nt
		nt.Start()
	}
}

// Demand reports whether a poll has a taker, and which tasks are due a
// pause (the poll loop's backpressure: RATIONALE.md, "Backpressure").
// Without tasks (not assigned yet) it polls: records of newly assigned
// partitions come only with a poll.
func (s *Set) Demand() (want bool, pause []*Task) {
	if s.d.Budget.OverInFlight() {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tasks) == 0 {
		return true, nil
	}
	for _, t := range s.tasks {
		switch t.DemandState() {
		case DemandTakes:
			want = true
		case DemandPauseDue:
			pause = append(pause, t)
		}
	}
	return want, pause
}

// Resume is one pass of the flow loop: paused partitions that drained
// resume, and each task's dispatch runs as a safety net (its kick timer
// runs it when records fall due or wait).
func (s *Set) Resume() {
	s.mu.Lock()
	above := false
	for _, t := range s.tasks {
		t.MaybeResume()
		above = t.DispatchAbove() || above
	}
	s.mu.Unlock()
	if s.d.Inst.AsyncSize != nil {
		s.d.Inst.AsyncSize.Above.Store(above)
	}
}

// Fetched is one partition's part of a poll as the source hands it to the
// set: plain values, not the client's types.
type Fetched struct {
	Topic     string
	Partition int32
	Records   []*kgo.Record // in offset order
	// HighWatermark is the partition's, as the fetch saw it (0: unknown).
	HighWatermark int64
	// CaughtUpAt is, for a fetch that brought no records and no error, the
	// end it reached (Task.CaughtUp); -1 otherwise.
	CaughtUpAt int64
}

// taskBatch is a partition's fetched records on their way to its task.
type taskBatch struct {
	t    *Task
	recs []*kgo.Record
}

// Dispatch hands each partition's fetched records to its task. The tasks
// are looked up under the set's lock and given their records after it: a
// task's enqueue may take its release order's lock, which comes first
// (DESIGN.md, "Lock order"). Records of a partition with no task are not
// ours: they are left uncommitted for the owner. Only the poll loop calls
// it.
func (s *Set) Dispatch(fetched []Fetched) {
	batches := s.batches[:0]
	s.mu.Lock()
	for i := range fetched {
		f := &fetched[i]
		t := s.taskFor(f)
		if t == nil {
			continue
		}
		switch {
		case len(f.Records) > 0:
			batches = append(batches, taskBatch{t, f.Records})
		case f.CaughtUpAt >= 0:
			t.CaughtUp(f.CaughtUpAt)
		}
	}
	s.mu.Unlock()
	for _, b := range batches {
		b.t.Enqueue(b.recs) // a task detached meanwhile takes them and never runs them: uncommitted
	}
	clear(batches)
	s.batches = batches[:0]
}

// taskFor is the task f's records go to, noting its high watermark (under
// s.mu): its partition's, or in a pool the one task, made at the first
// records.
func (s *Set) taskFor(f *Fetched) *Task {
	if !s.pool {
		t := s.tasks[TP{Topic: f.Topic, Partition: f.Partition}]
		if t != nil && f.HighWatermark > 0 {
			t.HighWatermark.Store(f.HighWatermark)
		}
		return t
	}
	if len(f.Records) == 0 {
		return nil
	}
	t := s.tasks[PoolTP]
	if t == nil {
		t = NewTask(s.d, PoolTP.Topic, PoolTP.Partition, nil)
		s.tasks[PoolTP] = t
		t.Start()
	}
	return t
}
