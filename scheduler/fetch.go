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
)

func (p *Pipeline) signalFlow() {
	select {
	case p.flow <- struct{}{}:
	default:
	}
}

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
		case <-p.flow:
		case <-tick.C:
		}
		p.mu.Lock()
		for _, t := range p.tasks {
			t.maybeResume()
			t.dispatch() // a safety net: the task's kick timer runs it when records fall due or wait
		}
		p.mu.Unlock()
	}
}

// awaitDemand is the pipeline's backpressure (RATIONALE.md, "Backpressure"):
// it returns once a poll has a taker — some task is under its bounds, and
// the host under host.max_in_flight — and false when ctx ends first. While
// nobody takes records the loop simply does not poll: the client keeps the
// fetch it buffered (one per broker) and sends no other, so nothing is
// dropped and nothing is fetched twice, and the next poll returns at once.
// Only when some tasks take records and others are full are the full ones
// paused, so that the polls for the others do not grow them.
func (p *Pipeline) awaitDemand(ctx context.Context) bool {
	tick := (*time.Ticker)(nil)
	defer func() {
		p.awaiting.Store(false)
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		if want, full := p.demand(); want {
			for _, t := range full {
				t.pauseIfFull()
			}
			return true
		}
		if tick == nil {
			// The host-wide bound can clear without this pipeline finishing
			// anything: look again every 10 ms besides the signals.
			tick = time.NewTicker(10 * time.Millisecond)
			p.awaiting.Store(true)
			p.stats.HeldBack.Add(1)
			continue // a record may have finished before awaiting was set
		}
		select {
		case <-ctx.Done():
			return false
		case <-p.demandCh:
		case <-tick.C:
		}
	}
}

// signalDemand wakes awaitDemand (a record finished while it waits).
func (p *Pipeline) signalDemand() {
	select {
	case p.demandCh <- struct{}{}:
	default:
	}
}

// demand reports whether a poll has a taker, and which tasks are full (to
// be paused if one has). Without tasks (not assigned yet) it polls: records
// of newly assigned partitions come only with a poll.
func (p *Pipeline) demand() (want bool, full []*task) {
	if p.budget.overInFlight() {
		return false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tasks) == 0 {
		return true, nil
	}
	for _, t := range p.tasks {
		if t.wantsRecords() {
			want = true
		} else {
			full = append(full, t)
		}
	}
	return want, full
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

// dispatch hands each partition's fetched records to its task.
func (p *Pipeline) dispatch(fetches kgo.Fetches) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		t := p.tasks[tp{fp.Topic, fp.Partition}]
		if t == nil {
			return // not ours: the records are left uncommitted for the owner
		}
		if fp.HighWatermark > 0 {
			t.highWatermark.Store(fp.HighWatermark)
		}
		if len(fp.Records) > 0 {
			t.enqueue(fp.Records)
		}
	})
}

// readHook counts the records the client decodes from fetch responses.
type readHook struct{ n *atomic.Int64 }

func (h readHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.n.Add(int64(m.NumRecords))
}
