package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// offsetCommits is the at_least_once committer (commit.go): records'
// outputs are produced as they finish, and each partition's watermark — the
// first offset whose outcome is not durable yet — is committed every
// kafka.commit_interval and before the partition moves, with the done
// offsets above it in the commit's metadata (RATIONALE.md, "Committing:
// the watermark", "Done offsets in commit metadata").
type offsetCommits struct{ p *Pipeline }

// begin starts the commit loop (owned by p.wg).
func (c offsetCommits) begin() bool {
	c.p.wg.Add(1)
	go c.commitLoop()
	return true
}

// pollContext: commits run on their own loop, so a poll is bounded by
// nothing but ctx.
func (offsetCommits) pollContext(ctx context.Context) (context.Context, func()) {
	return ctx, func() {}
}

func (offsetCommits) afterPoll(context.Context) bool { return true }

// revoked drains the revoked partitions' tasks (in-flight records finish
// within shutdown.drain_timeout, queued ones are left for the next owner)
// and commits what is done before the partitions move. It also runs for
// every partition when the pipeline leaves the group on shutdown.
func (c offsetCommits) revoked(ctx context.Context, revoked map[string][]int32) {
	p := c.p
	tasks := p.detach(revoked)
	if len(tasks) == 0 {
		return
	}
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	p.drain(tasks)
	if err := c.commitTasks(ctx, tasks); err != nil {
		p.log.Error("commit on revoke failed; the new owner will process the uncommitted records again", "err", err)
	}
	for _, t := range tasks {
		t.Close()
	}
	p.detachState(tasks)()
	for _, t := range tasks {
		p.log.Debug("partition revoked", "topic", t.Topic, "partition", t.Partition)
	}
}

// lost abandons the partitions: another member may already own them, so
// nothing is committed.
func (c offsetCommits) lost(lost map[string][]int32) {
	p := c.p
	tasks := p.detach(lost)
	for _, t := range tasks {
		t.Stop()
		t.Abort()
	}
	for _, t := range tasks {
		t.WaitWorkers(time.Now().Add(time.Minute))
		t.Close()
		p.log.Warn("partition lost; its uncommitted records will be processed again by its owner", "topic", t.Topic, "partition", t.Partition)
	}
	p.detachState(tasks)()
}

// commitLoop commits every kafka.commit_interval.
func (c offsetCommits) commitLoop() {
	p := c.p
	defer p.wg.Done()
	tick := time.NewTicker(p.cfg.Kafka.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-tick.C:
			p.commitMu.Lock()
			tasks := p.attached()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := c.commitTasks(ctx, tasks); err != nil {
				p.log.Warn("commit failed; will retry", "err", err)
			}
			cancel()
			p.commitMu.Unlock()
		}
	}
}

// commitTasks commits each task's watermark, with the done offsets above it
// in the commit metadata, if either changed. Callers hold commitMu.
func (c offsetCommits) commitTasks(ctx context.Context, tasks []*partition.Task) error {
	p := c.p
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
		if *p.cfg.Kafka.RecordDoneOffsets {
			meta, _ = offsets.EncodeDone(off, above, p.cfg.Kafka.CommitMetadataMaxBytes)
		}
		if off == t.Committed.Load() && meta == t.CommittedMeta {
			continue
		}
		if commits[t.Topic] == nil {
			commits[t.Topic] = map[int32]kgo.EpochOffset{}
		}
		commits[t.Topic][t.Partition] = kgo.EpochOffset{Epoch: epoch, Offset: off}
		metas[tp{t.Topic, t.Partition}] = meta
		marks = append(marks, mark{t, off, meta})
	}
	if len(marks) == 0 {
		return nil
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				if m := metas[tp{rt.Topic, rt.Partitions[j].Partition}]; m != "" {
					rt.Partitions[j].Metadata = &m
				}
			}
		}
		return nil
	})
	var cerr error
	p.cl.CommitOffsetsSync(ctx, commits, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
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
		p.committed(m.t, m.off)
	}
	p.stats.Commits.Add(1)
	return nil
}

// final commits what the drained tasks finished, at Stop.
func (c offsetCommits) final(ctx context.Context, tasks []*partition.Task) {
	c.p.commitMu.Lock()
	defer c.p.commitMu.Unlock()
	if err := c.commitTasks(ctx, tasks); err != nil {
		c.p.log.Error("commit at shutdown failed; the partitions' next owner will process the uncommitted records again", "err", err)
	}
}

func (c offsetCommits) close() { c.p.cl.Close() }
