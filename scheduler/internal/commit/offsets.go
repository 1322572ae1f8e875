package commit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// Offsets is the at_least_once committer (commit.go): records'
// outputs are produced as they finish, and each partition's watermark — the
// first offset whose outcome is not durable yet — is committed every
// kafka.commit_interval and before the partition moves, with the done
// offsets above it in the commit's metadata (RATIONALE.md, "Committing:
// the watermark", "Done offsets in commit metadata").
type Offsets struct {
	d Deps
	// commitMu is one commit at a time: the commit loop's, a revoke's
	// (held across its drain and commit) and the final one (DESIGN.md,
	// "Lock order").
	commitMu sync.Mutex
}

// NewOffsets is the at_least_once committer of the pipeline d is of.
func NewOffsets(d Deps) *Offsets { return &Offsets{d: d} }

// Start starts the commit loop (owned by Deps.Loops, ended by Deps.Quit).
func (c *Offsets) Start() {
	c.d.Loops.Add(1)
	go c.commitLoop()
}

// Begin: nothing to begin before the first poll (source.Pacer).
func (*Offsets) Begin() bool { return true }

// PollContext: commits run on their own loop, so a poll is bounded by
// nothing but ctx.
func (*Offsets) PollContext(ctx context.Context) (context.Context, func()) {
	return ctx, func() {}
}

func (*Offsets) AfterPoll(context.Context) bool { return true }

// CommitNow commits the attached tasks' watermarks (leaving nil: the
// commit loop's tick), or hands over the tasks of partitions that leave:
// revoked, it drains them and commits what they finished before the move
// (revoked); lost, it commits nothing of theirs (lost). A failed commit
// is logged: the next one, or the partitions' next owner, goes on from
// the last that succeeded.
func (c *Offsets) CommitNow(ctx context.Context, leaving map[string][]int32, tasks []*partition.Task, lost bool) bool {
	switch {
	case leaving == nil:
		c.commitMu.Lock()
		defer c.commitMu.Unlock()
		if err := c.commitTasks(ctx, c.d.Tasks.Attached()); err != nil {
			c.d.Log.Warn("commit failed; will retry", "err", err)
		}
	case lost:
		c.lost(tasks)
	default:
		c.revoked(ctx, tasks)
	}
	return true
}

// revoked drains the revoked partitions' tasks (in-flight records finish
// within shutdown.drain_timeout, queued ones are left for the next owner)
// and commits what is done before the partitions move, under commitMu
// across both.
func (c *Offsets) revoked(ctx context.Context, tasks []*partition.Task) {
	d := c.d
	if len(tasks) == 0 {
		return
	}
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	d.Drain(tasks)
	if err := c.commitTasks(ctx, tasks); err != nil {
		d.Log.Error("commit on revoke failed; the new owner will process the uncommitted records again", "err", err)
	}
	for _, t := range tasks {
		t.Close()
	}
	d.Gone(tasks)()
	for _, t := range tasks {
		d.Log.Debug("partition revoked", "topic", t.Topic, "partition", t.Partition)
	}
}

// lost abandons the partitions' tasks: another member may already own
// them, so nothing is committed.
func (c *Offsets) lost(tasks []*partition.Task) {
	d := c.d
	for _, t := range tasks {
		t.Stop()
		t.Abort()
	}
	for _, t := range tasks {
		t.WaitWorkers(time.Now().Add(time.Minute))
		t.Close()
		d.Log.Warn("partition lost; its uncommitted records will be processed again by its owner", "topic", t.Topic, "partition", t.Partition)
	}
	d.Gone(tasks)()
}

// commitLoop commits every kafka.commit_interval (CommitNow).
func (c *Offsets) commitLoop() {
	d := c.d
	defer d.Loops.Done()
	tick := time.NewTicker(d.Config.Kafka.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-d.Quit:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			c.CommitNow(ctx, nil, nil, false)
			cancel()
		}
	}
}

// commitTasks commits each task's watermark, with the done offsets above it
// in the commit metadata, if either changed. Callers hold c.commitMu.
func (c *Offsets) commitTasks(ctx context.Context, tasks []*partition.Task) error {
	d := c.d
	type mark struct {
		t    *partition.Task
		off  int64
		meta string
	}
	commits := map[string]map[int32]kgo.EpochOffset{}
	metas := map[tp]string{}
	var marks []mark
	for _, t := range tasks {
		off, epoch, above, ok := t.Tracker.CommitPoint()
		if !ok {
			continue
		}
		var meta string
		if *d.Config.Kafka.RecordDoneOffsets {
			meta, _ = offsets.EncodeDone(off, above, d.Config.Kafka.CommitMetadataMaxBytes)
		}
		if off == t.Committed.Load() && meta == t.CommittedMeta {
			continue
		}
		if commits[t.Topic] == nil {
			commits[t.Topic] = map[int32]kgo.EpochOffset{}
		}
		commits[t.Topic][t.Partition] = kgo.EpochOffset{Epoch: epoch, Offset: off}
		metas[tp{Topic: t.Topic, Partition: t.Partition}] = meta
		marks = append(marks, mark{t, off, meta})
	}
	if len(marks) == 0 {
		return nil
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				if m := metas[tp{Topic: rt.Topic, Partition: rt.Partitions[j].Partition}]; m != "" {
					rt.Partitions[j].Metadata = &m
				}
			}
		}
		return nil
	})
	var cerr error
	d.Client.CommitOffsetsSync(ctx, commits, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if e := kerr.ErrorForCode(rp.ErrorCode); e != nil && cerr == nil {
					cerr = fmt.Errorf("%s[%d]: %w", rt.Topic, rp.Partition, e)
				}
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	for _, m := range marks {
		m.t.Committed.Store(m.off)
		m.t.CommittedMeta = m.meta
		d.OnCommitted(m.t, m.off)
	}
	d.Stats.Commits.Add(1)
	return nil
}

// Final commits what the drained tasks finished, at Stop.
func (c *Offsets) Final(ctx context.Context, tasks []*partition.Task) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if err := c.commitTasks(ctx, tasks); err != nil {
		c.d.Log.Error("commit at shutdown failed; the partitions' next owner will process the uncommitted records again", "err", err)
	}
}

func (c *Offsets) Close() { c.d.Client.Close() }
