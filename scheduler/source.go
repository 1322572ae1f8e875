package scheduler

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/commit"
)

// source is where a pipeline's records come from: the seam between the
// client's polls and the partitions' tasks. The pipeline's wiring
// (Pipeline.wire) picks one by consume mode, once:
//
//   - groupSource (consume: group): a consumer group's poll loop, with the
//     pipeline's backpressure and its partition callbacks (onAssigned,
//     onRevoked, onLost); its committer paces it (commit.Pacer).
//   - shareSource (consume: share, share.go): a share group's poll loop,
//     which polls only once the previous poll's records are acknowledged,
//     and keeps the locks of the records it holds alive.
//
// Pipeline.Start runs it; Pipeline.Stop ends it, and leaves the group once
// the pipeline's outcomes are committed.
// (DESIGN.md, "Seams: source, ledger, sink, committer".)
type source interface {
	// run is the poll loop: it fetches and hands records to tasks until
	// ctx ends, then closes p.pollDone. Its helpers are started here and
	// owned by p.wg.
	run(ctx context.Context)
	// leave leaves the group, once every task is drained, committed and
	// detached (Pipeline.Stop): the revoke callback finds nothing to do.
	leave(ctx context.Context)
}

// groupSource is a consumer group's poll loop. With BlockRebalanceOnPoll
// no rebalance runs between a poll and AllowRebalance, so a batch is never
// dispatched to a task that was revoked after the poll returned it.
type groupSource struct {
	p     *Pipeline
	pacer commit.Pacer
}

func (s groupSource) run(ctx context.Context) {
	p := s.p
	p.wg.Add(1)
	go p.flowLoop()
	defer close(p.pollDone)
	if !s.pacer.Begin() {
		return
	}
	var lastErr time.Time
	for {
		pctx, done := s.pacer.PollContext(ctx)
		pause, polled := p.awaitDemand(pctx) // false when pctx ends first: no poll
		var fetches kgo.Fetches
		if polled {
			fetches = p.poll(pctx, pause, &lastErr)
		}
		done()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			if polled {
				p.cl.AllowRebalance()
			}
			return
		}
		if polled {
			p.logFetchErrors(fetches, &lastErr)
			p.dispatch(fetches)
			p.cl.AllowRebalance()
		}
		if !s.pacer.AfterPoll(ctx) {
			return
		}
	}
}

func (s groupSource) leave(ctx context.Context) {
	if err := s.p.cl.LeaveGroupContext(ctx); err != nil {
		s.p.log.Warn("leaving the group", "err", err)
	}
}
