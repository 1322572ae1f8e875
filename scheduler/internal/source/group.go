package source

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// Pacer is what a consumer group's committer says about the poll loop:
// whether it can start, how long the next poll may last, and what runs
// between polls (a transaction's cut; polling and ending a transaction
// never overlap, franz-go requires it). commit.Offsets and
// commit.Transactions are pacers; the source names the interface, so that
// it does not import the committers.
type Pacer interface {
	// Begin runs on the poll loop before its first poll; false: the
	// pipeline cannot start (it failed).
	Begin() bool
	// PollContext is ctx bounded for the next poll; done is called once
	// the poll returned.
	PollContext(ctx context.Context) (pctx context.Context, done func())
	// AfterPoll runs between polls; false: the pipeline cannot go on.
	AfterPoll(ctx context.Context) bool
}

// Group is a consumer group's poll loop. With BlockRebalanceOnPoll no
// rebalance runs between a poll and AllowRebalance, so a batch is never
// dispatched to a task that was revoked after the poll returned it.
// It owns the group's membership (membership.go): the client's partition
// callbacks make and take the tasks (Assigned, Revoked, Lost).
type Group struct {
	d Deps
	c Committer
}

// NewGroup is the source of the consumer-group pipeline d is of, paced by
// its committer c, which it hands the tasks of partitions that leave.
func NewGroup(d Deps, c Committer) *Group { return &Group{d: d, c: c} }

// Pacer is the committer that paces the poll loop.
func (s *Group) Pacer() Pacer { return s.c }

func (s *Group) Run(ctx context.Context) {
	d := &s.d
	d.Loops.Add(1)
	go d.flowLoop()
	defer close(d.PollDone)
	if !s.c.Begin() {
		return
	}
	var lastErr time.Time
	for {
		pctx, done := s.c.PollContext(ctx)
		pause, polled := s.awaitDemand(pctx) // false when pctx ends first: no poll
		var fetches kgo.Fetches
		if polled {
			fetches = s.poll(pctx, pause, &lastErr)
		}
		done()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			if polled {
				d.Client.AllowRebalance()
			}
			return
		}
		if polled {
			d.logFetchErrors(fetches, &lastErr)
			d.dispatch(fetches)
			d.Client.AllowRebalance()
		}
		if !s.c.AfterPoll(ctx) {
			return
		}
	}
}

func (s *Group) Leave(ctx context.Context) {
	if err := s.d.Client.LeaveGroupContext(ctx); err != nil {
		s.d.Log.Warn("leaving the group", "err", err)
	}
}

// awaitDemand is the pipeline's backpressure (RATIONALE.md, "Backpressure"):
// it returns once a poll has a taker — some task is under its bounds, and
// the host under host.max_in_flight (partition.Set.Demand) — and false when ctx
// ends first. While nobody takes records the loop simply does not poll:
// the client keeps the fetch it buffered (one per broker) and sends no
// other, so nothing is dropped and nothing is fetched twice, and the next
// poll returns at once. When some tasks take records and others hold
// pauseFactor times their bounds, it names the latter: poll pauses them
// before the client sends its next fetch.
func (s *Group) awaitDemand(ctx context.Context) (pause []*partition.Task, ok bool) {
	d := &s.d
	tick := (*time.Ticker)(nil)
	defer func() {
		d.Flow.Awaiting.Store(false)
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		if want, due := d.Tasks.Demand(); want {
			return due, true
		}
		if tick == nil {
			// The host-wide bound can clear without this pipeline finishing
			// anything: look again every 10 ms besides the signals.
			tick = time.NewTicker(10 * time.Millisecond)
			d.Flow.Awaiting.Store(true)
			d.Stats.HeldBack.Add(1)
			continue // a record may have finished before awaiting was set
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-d.Flow.DemandCh:
		case <-tick.C:
		}
	}
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
func (s *Group) poll(ctx context.Context, pause []*partition.Task, lastErr *time.Time) kgo.Fetches {
	d := &s.d
	if len(pause) == 0 {
		return d.Client.PollRecords(ctx, pollMax)
	}
	if d.Client.BufferedFetchRecords() == 0 {
		// Wait for the fetch in flight, which may carry their records.
		f := d.Client.PollRecords(ctx, 1)
		if f.IsClientClosed() || ctx.Err() != nil {
			return f
		}
		d.logFetchErrors(f, lastErr)
		d.dispatch(f)
	}
	if n := d.Client.BufferedFetchRecords(); n > 1 {
		f := d.Client.PollRecords(nil, int(n-1)) //nolint:staticcheck // nil: take what is held, never wait
		d.logFetchErrors(f, lastErr)
		d.dispatch(f)
	}
	for _, t := range pause {
		t.Pause()
	}
	return d.Client.PollRecords(nil, pollMax) //nolint:staticcheck // nil: take what is held, never wait
}
