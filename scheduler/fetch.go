// The fetch step of a record's path (DESIGN.md): the poll loop's
// backpressure (awaitDemand) and the hand-off of each partition's fetched
// records to its task.

package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// flowLoop resumes paused partitions once they drained (RATIONALE.md,
// "Backpressure"). It runs on a signal from finishing records and every 50ms,
// because the host-wide bound can clear without this pipeline finishing
// anything.
func (p *Pipeline) flowLoop() {
	defer p.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-p.flow.Flow:
		case <-tick.C:
		}
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
}

// awaitDemand is the pipeline's backpressure (RATIONALE.md, "Backpressure"):
// it returns once a poll has a taker — some task is under its bounds, and
// the host under host.max_in_flight — and false when ctx ends first. While
// nobody takes records the loop simply does not poll: the client keeps the
// fetch it buffered (one per broker) and sends no other, so nothing is
// dropped and nothing is fetched twice, and the next poll returns at once.
// When some tasks take records and others hold pauseFactor times their
// bounds, it names the latter: poll pauses them before the client sends its
// next fetch.
func (p *Pipeline) awaitDemand(ctx context.Context) (pause []*partition.Task, ok bool) {
	tick := (*time.Ticker)(nil)
	defer func() {
		p.flow.Awaiting.Store(false)
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		if want, due := p.demand(); want {
			return due, true
		}
		if tick == nil {
			// The host-wide bound can clear without this pipeline finishing
			// anything: look again every 10 ms besides the signals.
			tick = time.NewTicker(10 * time.Millisecond)
			p.flow.Awaiting.Store(true)
			p.stats.HeldBack.Add(1)
			continue // a record may have finished before awaiting was set
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-p.flow.DemandCh:
		case <-tick.C:
		}
	}
}

// demand reports whether a poll has a taker, and which tasks are due a
// pause. Without tasks (not assigned yet) it polls: records of newly
// assigned partitions come only with a poll.
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

// pollMax is the most records one poll hands to the tasks.
const pollMax = 10000

// poll returns the next records to dispatch, pausing the named tasks'
// partitions first (DESIGN.md, "Backpressure").
//
// franz-go drops the records it holds for a partition that is paused when
// they are polled, to be fetched again after the resume; and it sends its
// next fetch to a broker as soon as the one it buffered from that broker is
// wholly taken, with the partitions unpaused at that moment. So the records
// it holds are taken first — all but one, which keeps the fetch buffered
// and the next one unsent — then the partitions are paused, and the last
// record's poll lets the next fetch go without them. What is fetched again:
// the batch of that last record when it is a paused partition's, and, with
// several brokers, a paused partition's share of a fetch its broker had in
// flight (its buffered fetch was taken whole by the first poll).
//
// Once a poll has returned records, rebalances wait (BlockRebalanceOnPoll)
// until the loop calls AllowRebalance: every poll after the first is given
// no context, so it returns what the client holds without waiting for more.
func (p *Pipeline) poll(ctx context.Context, pause []*partition.Task, lastErr *time.Time) kgo.Fetches {
	if len(pause) == 0 {
		return p.cl.PollRecords(ctx, pollMax)
	}
	if p.cl.BufferedFetchRecords() == 0 {
		// Wait for the fetch in flight, which may carry their records.
		f := p.cl.PollRecords(ctx, 1)
		if f.IsClientClosed() || ctx.Err() != nil {
			return f
		}
		p.logFetchErrors(f, lastErr)
		p.dispatch(f)
	}
	if n := p.cl.BufferedFetchRecords(); n > 1 {
		f := p.cl.PollRecords(nil, int(n-1)) //nolint:staticcheck // nil: take what is held, never wait
		p.logFetchErrors(f, lastErr)
		p.dispatch(f)
	}
	for _, t := range pause {
		t.Pause()
	}
	return p.cl.PollRecords(nil, pollMax) //nolint:staticcheck // nil: take what is held, never wait
}

// logFetchErrors logs fetch errors, at most one every 5 s (lastErr); a
// poll's own context ending is not one.
func (p *Pipeline) logFetchErrors(fetches kgo.Fetches, lastErr *time.Time) {
	fetches.EachError(func(t string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if time.Since(*lastErr) > 5*time.Second {
			*lastErr = time.Now()
			p.log.Warn("fetch error", "topic", t, "partition", part, "err", err)
		}
	})
}

// dispatch hands each partition's fetched records to its task. The tasks
// are looked up under Pipeline.mu and given their records after it: a
// task's enqueue may take its release order's lock, which comes first
// (DESIGN.md, "Lock order"). Only the poll loop calls it.
func (p *Pipeline) dispatch(fetches kgo.Fetches) {
	batches := p.dispatchBuf[:0]
	p.mu.Lock()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		t := p.tasks[tp{fp.Topic, fp.Partition}]
		if t == nil {
			return // not ours: the records are left uncommitted for the owner
		}
		if fp.HighWatermark > 0 {
			t.HighWatermark.Store(fp.HighWatermark)
		}
		if len(fp.Records) > 0 {
			batches = append(batches, taskBatch{t, fp.Records})
		} else if fp.Err == nil {
			t.CaughtUp(fp.FetchPartition)
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
