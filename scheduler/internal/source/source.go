// Package source is the source seam: where a pipeline's records come from
// — a consumer group's poll loop (Group) or a share group's (Share), each
// with the pipeline's backpressure. A source holds no pointer to its
// pipeline (it cannot: it does not import package scheduler); what it
// reaches of the pipeline comes once in a Deps, and the pipeline's task map
// only through the funcs there. Only package scheduler imports it.
// (DESIGN.md, "Seams: source, ledger, sink, committer".)
package source

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// ClientPauser is a client as the engine's partition.Pauser: a task's
// backpressure pauses and resumes its partition's fetching.
type ClientPauser struct{ Client *kgo.Client }

func (c ClientPauser) PausePartition(topic string, partition int32) {
	c.Client.PauseFetchPartitions(map[string][]int32{topic: {partition}})
}

func (c ClientPauser) ResumePartition(topic string, partition int32) {
	c.Client.ResumeFetchPartitions(map[string][]int32{topic: {partition}})
}

// CaughtUpAt is the end a fetch that brought fp no records reached: its
// last stable offset (read_committed), else its high watermark
// (partition.Task.CaughtUp).
func CaughtUpAt(fp kgo.FetchPartition) int64 {
	if fp.LastStableOffset >= 0 {
		return fp.LastStableOffset
	}
	return fp.HighWatermark
}

// Source is where a pipeline's records come from: the seam between the
// client's polls and the partitions' tasks. The pipeline's wiring
// (Pipeline.wire) picks one by consume mode, once:
//
//   - Group (consume: group, group.go): a consumer group's poll loop, with
//     the pipeline's backpressure, and the group's membership
//     (membership.go: the partition callbacks Assigned, Revoked, Lost make
//     and take its tasks); its committer paces it (Pacer).
//   - Share (consume: share, share.go): a share group's poll loop, which
//     polls only once the previous poll's records are acknowledged, and
//     keeps the locks of the records it holds alive.
//
// Pipeline.Start runs it; Pipeline.Stop ends it, and leaves the group once
// the pipeline's outcomes are committed.
// (DESIGN.md, "Seams: source, ledger, sink, committer".)
type Source interface {
	// Run is the poll loop: it fetches and hands records to tasks until
	// ctx ends, then closes Deps.PollDone. Its helpers are started here
	// and owned by Deps.Loops.
	Run(ctx context.Context)
	// Leave leaves the group, once every task is drained, committed and
	// detached (Pipeline.Stop): the revoke callback finds nothing to do.
	Leave(ctx context.Context)
}

// Deps is everything a source is given by its pipeline, once, when the
// pipeline is wired (Pipeline.sourceDeps): the source holds no pointer to
// the pipeline and reaches it only through what is here.
type Deps struct {
	Config   *config.Config   // kafka.start_offset (share)
	Pipeline *config.Pipeline // share.max_records
	Group    string           // the consumer or share group
	Client   *kgo.Client
	Log      *slog.Logger
	Stats    *hooks.Stats   // polls held back
	Budget   *budget.Budget // host.max_in_flight
	Flow     *partition.FlowSignals

	// Loops owns the flow loop and the renewal loop (pipeLife.wg); they
	// end when Quit closes. Run closes PollDone as it returns.
	Loops    *sync.WaitGroup
	Quit     <-chan struct{}
	PollDone chan<- struct{}

	// Tasks are the pipeline's tasks (the task map): the poll loop asks
	// whether a poll has a taker and which tasks are due a pause
	// (Set.Demand), hands a poll's records to their tasks (Set.Dispatch,
	// as partition.Fetched: only the poll loop dispatches), and the flow
	// loop resumes paused partitions that drained (Set.Resume).
	Tasks *partition.Set

	// Opening tells the subscribers to an assignment (the state stores:
	// opened and restored before the partitions' tasks exist) of newly
	// assigned partitions, on the client's rebalance goroutine; false: the
	// pipeline failed or stopped, and no task is made. Nil: none.
	Opening func(ctx context.Context, assigned map[string][]int32) bool

	// fetched is dispatch's, reused: only the poll loop dispatches.
	fetched []partition.Fetched
}

// dispatch hands a poll's records to the pipeline's tasks, each
// partition's part as plain values (partition.Fetched), with no allocation
// once its buffer has grown to a poll's partitions.
func (d *Deps) dispatch(fetches kgo.Fetches) {
	out := d.fetched[:0]
	for i := range fetches {
		for j := range fetches[i].Topics {
			ft := &fetches[i].Topics[j]
			for k := range ft.Partitions {
				fp := &ft.Partitions[k]
				end := int64(-1)
				if len(fp.Records) == 0 && fp.Err == nil {
					end = CaughtUpAt(*fp)
				}
				out = append(out, partition.Fetched{Topic: ft.Topic, Partition: fp.Partition, Records: fp.Records, HighWatermark: fp.HighWatermark, CaughtUpAt: end})
			}
		}
	}
	d.Tasks.Dispatch(out)
	clear(out)
	d.fetched = out[:0]
}

// flowLoop resumes paused partitions once they drained (RATIONALE.md,
// "Backpressure"). It runs on a signal from finishing records and every 50ms,
// because the host-wide bound can clear without this pipeline finishing
// anything.
func (d *Deps) flowLoop() {
	defer d.Loops.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-d.Quit:
			return
		case <-d.Flow.Flow:
		case <-tick.C:
		}
		d.Tasks.Resume()
	}
}

// logFetchErrors logs fetch errors, at most one every 5 s (lastErr); a
// poll's own context ending is not one.
func (d *Deps) logFetchErrors(fetches kgo.Fetches, lastErr *time.Time) {
	fetches.EachError(func(t string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if time.Since(*lastErr) > 5*time.Second {
			*lastErr = time.Now()
			d.Log.Warn("fetch error", "topic", t, "partition", part, "err", err)
		}
	})
}
