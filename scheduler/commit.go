package scheduler

import (
	"context"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// committer is how a pipeline commits what its ledger counts as done; the
// pipeline's consume mode and guarantee choose one, once, in Pipeline.wire:
//
//   - offsetCommits (at_least_once, offsetcommit.go): each partition's
//     watermark is committed every kafka.commit_interval and before a
//     partition moves, with the done offsets above it in the commit's
//     metadata.
//   - transactions (exactly_once, txn.go): outcomes are released into an
//     open transaction in offset order; a cut commits the watermarks inside
//     the transaction. It paces the poll loop (commitPacer): a cut runs
//     between polls.
//   - shareAcks (consume: share, share.go): nothing to commit — each record
//     is acknowledged as it finishes (shareLedger); at shutdown the records
//     still held are given back.
//
// The pipeline's partition callbacks and Stop call it; nothing else knows
// which one runs. It never calls the state stores: they subscribe to
// commits (Pipeline.onCommitted). (DESIGN.md, "Seams: source, ledger,
// sink, committer".)
type committer interface {
	// revoked takes the revoked partitions' tasks away before the
	// partitions move; lost abandons partitions another member may own.
	revoked(ctx context.Context, parts map[string][]int32)
	lost(parts map[string][]int32)
	// final commits what the drained tasks finished (Pipeline.Stop), while
	// they are still attached and before the group is left.
	final(ctx context.Context, tasks []*partition.Task)
	// close closes the pipeline's client, last.
	close()
}
