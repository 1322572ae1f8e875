// Package commit is the committer seam: how a pipeline commits what its
// ledger counts as done — offset commits (Offsets), transactions
// (Transactions), or nothing but a share group's acknowledgements
// (ShareAcks). A committer holds no pointer to its pipeline (it cannot: it
// does not import package scheduler); what it reaches of the pipeline comes
// once in a Deps. (DESIGN.md, "Seams: source, ledger, sink, committer".)
package commit

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// Committer is how a pipeline commits what its ledger counts as done; the
// pipeline's consume mode and guarantee choose one, once, in Pipeline.wire:
//
//   - Offsets (at_least_once, offsets.go): each partition's watermark is
//     committed every kafka.commit_interval and before a partition moves,
//     with the done offsets above it in the commit's metadata.
//   - Transactions (exactly_once, txn.go): outcomes are released into an
//     open transaction in offset order; a cut commits the watermarks inside
//     the transaction. It paces the poll loop (source.Pacer): a cut runs between
//     polls.
//   - ShareAcks (consume: share, share.go): nothing to commit — each record
//     is acknowledged as it finishes (ledger.Share); at shutdown
//     the records still held are given back.
//
// It is four calls, the same for every row of the wiring table; what
// differs per guarantee is inside each implementation:
//
//   - Start starts what the committer runs on its own (Offsets' commit
//     loop, owned by Deps.Loops and ended by Deps.Quit); the others have
//     nothing to start (a transaction begins on the poll loop:
//     source.Pacer).
//   - CommitNow commits, on demand, what tasks finished: the periodic
//     commit (Offsets' tick; a transaction's cut between polls), and the
//     tasks of partitions that leave, which the source's membership
//     (source.Group.Revoked, Lost) detached and hands over. What becomes
//     of those is the guarantee's: at_least_once drains a revoked
//     partition's tasks and commits what they finished before the move,
//     and commits nothing of a lost one's; exactly_once cuts them off at
//     once (the open transaction aborts); a share group has no assignment.
//   - Final is the last commit, at Pipeline.Stop, of the drained tasks.
//   - Close closes the pipeline's client, last.
//
// Pipeline.Start and Stop, and the source's membership, call it; nothing
// else knows which one runs. It never calls the state stores: they
// subscribe to commits (Deps.OnCommitted: pipeSubscribers.onCommitted).
// (DESIGN.md, "Seams: source, ledger, sink, committer".)
type Committer interface {
	Start()
	// CommitNow commits what tasks finished. leaving names the partitions
	// that leave the pipeline, tasks theirs (detached by the source), and
	// lost whether another member may own them already (revoked: it waits
	// for this call to return). With leaving nil nothing leaves: the
	// attached tasks are committed, read under the committer's own lock
	// (the periodic commit; tasks is nil). False: the pipeline cannot go
	// on.
	CommitNow(ctx context.Context, leaving map[string][]int32, tasks []*partition.Task, lost bool) bool
	// Final commits what the drained tasks finished (Pipeline.Stop), while
	// they are still attached and before the group is left.
	Final(ctx context.Context, tasks []*partition.Task)
	Close()
}

// Deps is everything a committer is given by its pipeline, once, when the
// pipeline is wired (Pipeline.commitDeps): the committer holds no pointer
// to the pipeline and reaches it only through what is here.
type Deps struct {
	Config   *config.Config   // kafka.commit_interval, the done offsets' metadata
	Pipeline *config.Pipeline // its name, transactions, state.enabled
	Group    string           // the consumer group (its committed offsets)
	Client   *kgo.Client
	Log      *slog.Logger
	Stats    *hooks.Stats // commits, transactions committed, aborted, settled

	// Loops owns the commit loop (pipeLife.wg); it ends when Quit closes.
	Loops      *sync.WaitGroup
	Quit       <-chan struct{}
	Background *background.Group // cut-off tasks retired, owned by the pipeline
	// Failed is set once the pipeline failed or broke: nothing more is
	// committed.
	Failed *atomic.Bool

	// Tasks are the pipeline's tasks (the task map): the committer reads
	// the attached ones (Set.Attached), takes those of partitions that
	// move (Set.Detach) and replaces the ones an aborted transaction cut
	// off (Set.Restart).
	Tasks *partition.Set
	// Drain stops tasks and waits for their records in progress
	// (shutdown.drain_timeout); Gone tells the pipeline's subscribers (the
	// state stores) that the partitions of detached tasks left; after
	// runs, once the tasks' workers ended, what the subscribers do then
	// (the stores close). A committer knows no subscriber.
	Drain func(tasks []*partition.Task)
	Gone  func(tasks []*partition.Task) (after func())
	// Forget drops what the sink remembers of partitions that moved
	// (partition.Sink.Forget).
	Forget func(parts map[string][]int32)
	// OnCommitted tells the pipeline's subscribers that the offsets below
	// upTo of t's partition are committed (pipeSubscribers.committed): the state
	// stores flush there.
	OnCommitted func(t *partition.Task, upTo int64)
	// Fail reports an error the pipeline cannot recover from (the host
	// stops); Broke, that its member cannot go on but a new one can
	// (the runner rebuilds it).
	Fail  func(error)
	Broke func(error)
}

// tp names a partition.
type tp = partition.TP
