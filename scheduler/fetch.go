// The fetch step of a record's path (DESIGN.md): what the poll loop
// (scheduler/internal/source) reads and does on the pipeline's task map —
// its backpressure's demand (demand), the flow loop's pass (resume) — and
// the hand-off of each partition's fetched records to its task (dispatch).

package scheduler

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/source"
)

// resume is one pass of the source's flow loop (source.Deps.Resume,
// RATIONALE.md, "Backpressure"): paused partitions that drained resume.
func (p *Pipeline) resume() {
	p.mu.Lock()
	above := false
	for _, t := range p.tasks {
		t.MaybeResume()
		// A safety net: the task's kick timer runs it when records
		// fall due or wait.
		above = t.DispatchAbove() || above
	}
	p.mu.Unlock()
	if p.asyncSize != nil {
		p.asyncSize.Above.Store(above)
	}
}

// demand reports whether a poll has a taker, and which tasks are due a
// pause (source.Deps.Demand: the poll loop's awaitDemand). Without tasks
// (not assigned yet) it polls: records of newly assigned partitions come
// only with a poll.
func (p *Pipeline) demand() (want bool, pause []*partition.Task) {
	if p.budget.OverInFlight() {
		return false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tasks) == 0 {
		return true, nil
	}
	for _, t := range p.tasks {
		switch t.DemandState() {
		case partition.DemandTakes:
			want = true
		case partition.DemandPauseDue:
			pause = append(pause, t)
		}
	}
	return want, pause
}

// dispatch hands each partition's fetched records to its task. The tasks
// are looked up under Pipeline.mu and given their records after it: a
// task's enqueue may take its release order's lock, which comes first
// (DESIGN.md, "Lock order"). Only the poll loop calls it
// (source.Deps.Dispatch).
func (p *Pipeline) dispatch(fetches kgo.Fetches) {
	batches := p.dispatchBuf[:0]
	p.mu.Lock()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		t := p.tasks[tp{Topic: fp.Topic, Partition: fp.Partition}]
		if t == nil {
			return // not ours: the records are left uncommitted for the owner
		}
		if fp.HighWatermark > 0 {
			t.HighWatermark.Store(fp.HighWatermark)
		}
		if len(fp.Records) > 0 {
			batches = append(batches, taskBatch{t, fp.Records})
		} else if fp.Err == nil {
			t.CaughtUp(source.CaughtUpAt(fp.FetchPartition))
		}
	})
	p.mu.Unlock()
	for _, b := range batches {
		b.t.Enqueue(b.recs) // a task detached meanwhile takes them and never runs them: uncommitted
	}
	clear(batches)
	p.dispatchBuf = batches[:0]
}

// taskBatch is a partition's fetched records on their way to its task.
type taskBatch struct {
	t    *partition.Task
	recs []*kgo.Record
}

// readHook counts the records the client decodes from fetch responses.
type readHook struct{ n *atomic.Int64 }

func (h readHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.n.Add(int64(m.NumRecords))
}
