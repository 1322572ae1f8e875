package scheduler

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// committer is how a pipeline makes its records' outcomes durable and
// commits their input offsets; the pipeline's guarantee chooses one, once,
// in newPipeline:
//
//   - offsetCommits (at_least_once, offsetcommit.go): outputs are produced
//     as records finish; each partition's watermark is committed every
//     kafka.commit_interval and before a partition moves, with the done
//     offsets above it in the commit's metadata.
//   - transactions (exactly_once, txn.go): outcomes are released into an
//     open transaction in offset order; a cut commits the watermarks inside
//     the transaction.
//   - shareAcks (consume: share, share.go): records come from a share
//     group; outputs are produced as under offset commits, and each record
//     is acknowledged (ACCEPT) once its outcome is durable, or given back
//     (RELEASE) when the host cannot finish it.
//
// The pipeline's partition callbacks, Start and Stop, and a task's release
// step call it; nothing else knows which one runs.
type committer interface {
	// run is the poll loop: it fetches, hands records to tasks and commits
	// until ctx ends, then closes p.pollDone. Its helpers are started here
	// and owned by p.wg.
	run(ctx context.Context)
	// revoked takes the revoked partitions' tasks away before the
	// partitions move; lost abandons partitions another member may own.
	revoked(ctx context.Context, parts map[string][]int32)
	lost(parts map[string][]int32)
	// stop shuts the pipeline down once the poll loop has ended: drain,
	// commit what is done, leave the group, close the client.
	stop(ctx context.Context)
	// releaseOrder is the release order a new task keeps (nil: none).
	releaseOrder(t *task) *releaser
	// markDone is told that r's outcome is durable (task.finish) and
	// reports whether r was still undecided: a record is finished once.
	markDone(t *task, r *kgo.Record) bool
	// abandoned is told that r was given up without an outcome
	// (task.drop).
	abandoned(t *task, r *kgo.Record)
	// recordsDoneOffsets reports whether done offsets above the watermark
	// are committed in the metadata (and read back by the next owner).
	recordsDoneOffsets() bool
	// dropKeepsPlace reports whether a dropped record keeps its place in the
	// release order unsettled, holding back every record after it.
	dropKeepsPlace() bool
}

// counter picks one of a Stats' counters.
type counter func(*Stats) *atomic.Int64
