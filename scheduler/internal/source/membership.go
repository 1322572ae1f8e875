package source

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// Committer is what a consumer group's source tells its committer: it
// paces the poll loop (Pacer), and is handed the tasks of partitions that
// leave — detached from the task map by the source, once, here — to commit
// what they finished or cut them off, as its guarantee says
// (commit.Committer.CommitNow: commit.Offsets, commit.Transactions).
// leaving are the partitions named (some may have had no task), never nil
// here: nil asks for the periodic commit; lost says whether another member
// may own them already (revoked: it waits for the call to return).
type Committer interface {
	Pacer
	CommitNow(ctx context.Context, leaving map[string][]int32, tasks []*partition.Task, lost bool) bool
}

// Assigned makes the tasks of newly assigned partitions (the client's
// partition callback, on its rebalance goroutine): it reads the done
// offsets the previous owners recorded above their commits
// (kafka.record_done_offsets), tells the assignment's subscribers
// (Deps.Opening: the state stores restore there, before any record of
// theirs runs), then adds the tasks to the task map.
func (s *Group) Assigned(ctx context.Context, assigned map[string][]int32) {
	d := &s.d
	skips := s.doneSets(ctx, assigned)
	if d.Opening != nil && !d.Opening(ctx, assigned) {
		return
	}
	d.Tasks.Assign(assigned, skips)
}

// Revoked takes the revoked partitions' tasks out of the task map and
// hands them to the committer before the partitions move. It also runs for
// every partition when the pipeline leaves the group on shutdown (none
// attached any more: Pipeline.Stop detached them).
func (s *Group) Revoked(ctx context.Context, revoked map[string][]int32) {
	s.leave(ctx, revoked, false)
}

// Lost takes the lost partitions' tasks out of the task map and hands them
// to the committer: nothing of theirs is committed.
func (s *Group) Lost(lost map[string][]int32) {
	s.leave(context.Background(), lost, true)
}

// leave detaches the tasks of parts and hands them to the committer.
func (s *Group) leave(ctx context.Context, parts map[string][]int32, lost bool) {
	if parts == nil {
		parts = map[string][]int32{} // nil would ask for the periodic commit
	}
	s.c.CommitNow(ctx, parts, s.d.Tasks.Detach(parts), lost)
}

// doneSets reads the group's committed offsets for the assigned partitions
// and decodes the done offsets recorded above them, so the new task skips
// them. Failure to read them costs duplicates, not correctness.
func (s *Group) doneSets(ctx context.Context, assigned map[string][]int32) map[partition.TP]*offsets.DoneSet {
	d := &s.d
	out := map[partition.TP]*offsets.DoneSet{}
	if !d.Tasks.Policy().DoneOffsets {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(d.Client).FetchOffsets(ctx, d.Group)
	if err != nil {
		d.Log.Warn("reading committed done offsets failed; records done by the previous owner may be processed again", "err", err)
		return out
	}
	for topic, parts := range assigned {
		for _, part := range parts {
			o, ok := resp.Lookup(topic, part)
			if !ok || o.Err != nil || o.Metadata == "" {
				continue
			}
			dn, err := offsets.DecodeDone(o.Metadata, o.At)
			if err != nil {
				if err != offsets.ErrNotOurs {
					d.Log.Warn("ignoring unreadable commit metadata", "topic", topic, "partition", part, "err", err)
				}
				continue
			}
			out[partition.TP{Topic: topic, Partition: part}] = dn
		}
	}
	return out
}
