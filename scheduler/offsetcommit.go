package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/tracing"
)

// offsetCommits is the at_least_once committer (commit.go): records'
// outputs are produced as they finish, and each partition's watermark — the
// first offset whose outcome is not durable yet — is committed every
// kafka.commit_interval and before the partition moves, with the done
// offsets above it in the commit's metadata (RATIONALE.md, "Committing:
// the watermark", "Done offsets in commit metadata").
type offsetCommits struct{ p *Pipeline }

func (c offsetCommits) releaseOrder(t *task) *releaser {
	if c.p.pc.Ordering == config.OrderPartition {
		return &releaser{}
	}
	return nil
}

func (c offsetCommits) recordsDoneOffsets() bool { return *c.p.cfg.Kafka.RecordDoneOffsets }
func (offsetCommits) dropKeepsPlace() bool       { return false }

// markDone marks r's offset done in its partition's tracker: from there it
// reaches the commit watermark.
func (offsetCommits) markDone(t *task, r *kgo.Record) bool { return t.tr.Done(r.Offset) }

// abandoned leaves r uncommitted: the partition's next owner processes it.
func (offsetCommits) abandoned(*task, *kgo.Record) {}

// run fetches records and hands each partition's records to its task.
// With BlockRebalanceOnPoll no rebalance runs between a poll and
// AllowRebalance, so a batch is never dispatched to a task that was revoked
// after the poll returned it.
func (c offsetCommits) run(ctx context.Context) {
	p := c.p
	p.wg.Add(2)
	go c.commitLoop()
	go p.flowLoop()
	defer close(p.pollDone)
	var lastErr time.Time
	for {
		pause, ok := p.awaitDemand(ctx)
		if !ok {
			return
		}
		fetches := p.poll(ctx, pause, &lastErr)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			p.cl.AllowRebalance()
			return
		}
		p.logFetchErrors(fetches, &lastErr)
		p.dispatch(fetches)
		p.cl.AllowRebalance()
	}
}

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
		t.close()
	}
	p.detachState(tasks)()
	for _, t := range tasks {
		p.log.Debug("partition revoked", "topic", t.topic, "partition", t.partition)
	}
}

// lost abandons the partitions: another member may already own them, so
// nothing is committed.
func (c offsetCommits) lost(lost map[string][]int32) {
	p := c.p
	tasks := p.detach(lost)
	for _, t := range tasks {
		t.stop()
		t.abort()
	}
	for _, t := range tasks {
		t.waitWorkers(time.Now().Add(time.Minute))
		t.close()
		p.log.Warn("partition lost; its uncommitted records will be processed again by its owner", "topic", t.topic, "partition", t.partition)
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
			p.mu.Lock()
			tasks := make([]*task, 0, len(p.tasks))
			for _, t := range p.tasks {
				tasks = append(tasks, t)
			}
			p.mu.Unlock()
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
func (c offsetCommits) commitTasks(ctx context.Context, tasks []*task) error {
	p := c.p
	type mark struct {
		t    *task
		off  int64
		meta string
	}
	commits := map[string]map[int32]kgo.EpochOffset{}
	metas := map[tp]string{}
	var marks []mark
	for _, t := range tasks {
		off, epoch, above, ok := t.tr.CommitPoint()
		if !ok {
			continue
		}
		var meta string
		if *p.cfg.Kafka.RecordDoneOffsets {
			meta, _ = offsets.EncodeDone(off, above, p.cfg.Kafka.CommitMetadataMaxBytes)
		}
		if off == t.committed.Load() && meta == t.committedMeta {
			continue
		}
		if commits[t.topic] == nil {
			commits[t.topic] = map[int32]kgo.EpochOffset{}
		}
		commits[t.topic][t.partition] = kgo.EpochOffset{Epoch: epoch, Offset: off}
		metas[tp{t.topic, t.partition}] = meta
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
		m.t.committed.Store(m.off)
		m.t.committedMeta = m.meta
		p.committed(m.t, m.off)
	}
	p.stats.Commits.Add(1)
	return nil
}

// stop shuts the pipeline down in stages once fetching stopped: leave the group,
// which revokes every partition (drain within shutdown.drain_timeout, then
// commit what is done); close the client.
func (c offsetCommits) stop(ctx context.Context) {
	p := c.p
	if err := p.cl.LeaveGroupContext(ctx); err != nil {
		p.log.Warn("leaving the group", "err", err)
	}
	// Tasks still attached (leave failed or timed out) are drained and
	// committed here.
	p.mu.Lock()
	all := map[string][]int32{}
	for k := range p.tasks {
		all[k.topic] = append(all[k.topic], k.partition)
	}
	p.mu.Unlock()
	if len(all) > 0 {
		c.revoked(ctx, all)
	}
	close(p.quit)
	p.wg.Wait()
	p.bg.Close()
	if p.state != nil {
		p.state.CloseAll()
	}
	p.cl.Close()
	p.leaveStatic(ctx)
}

// deliverOutputs produces a succeeded record's outputs; the record is done
// once the broker acknowledged all of them (outputAcked). If one cannot be
// produced, the record is dead-lettered instead (outputs already
// acknowledged stay: this is at-least-once). j.held is what the outputs
// count in the host's held outputs: given back once the broker answered for
// every one of them.
func (offsetCommits) deliverOutputs(t *task, j *job) {
	t.prepareOutputs(j)
	j.remaining.Store(int32(len(j.outs)))
	if j.tr != nil {
		j.sent = make([]func(int32, int64, error), len(j.outs))
	}
	for i := range j.outs {
		kr := j.outputRecord(i)
		if j.tr != nil {
			tp, ts, sent := j.tr.Produce(tracing.ProduceOutput, kr.Topic)
			kr.Headers = withTraceContext(kr.Headers, tp, ts)
			j.sent[i] = sent
		}
		kr.Context = j
		t.p.cl.Produce(context.Background(), kr, outputAcked)
	}
}

// outputAcked is the producer's callback for every output record: the
// record's Context is its job.
func outputAcked(pr *kgo.Record, err error) {
	j := pr.Context.(*job)
	t := j.t
	if j.sent != nil {
		for i := range j.outs {
			if j.outputRecord(i) == pr {
				j.sent[i](pr.Partition, pr.Offset, err)
			}
		}
	}
	if j.sb != nil && pr.Topic == t.state.Changelog() {
		j.sb.Acked(pr.Offset, err) // a changelog record (state.Batch)
		if err != nil {
			j.failedErr.CompareAndSwap(nil, &err)
		}
	} else if err != nil {
		j.failedErr.CompareAndSwap(nil, &err)
	} else {
		t.p.stats.Outputs.Add(1)
		t.ps.Outputs.Add(1)
	}
	if j.remaining.Add(-1) != 0 {
		return
	}
	t.p.budget.releaseOutputs(j.held)
	if e := j.failedErr.Load(); e != nil {
		// Not from inside a promise: fail produces again.
		f := failure{KindProduce, "producing an output failed: " + (*e).Error(), true}
		if !t.p.bg.Go(func() { t.fail(j.r, j.attempt, f, nil, j.tr) }) {
			t.p.log.Error("an output failed during shutdown; its record stays uncommitted", "topic", j.r.Topic, "partition", j.r.Partition, "offset", j.r.Offset, "err", *e)
		}
		return
	}
	t.finish(j.r)
	j.tr.End("ok", "", "")
}

// deliverFailure produces r's failure copy (retry or dead letter) to topic;
// r is done once that is acknowledged. A failed produce is tried again with
// backoff until it succeeds or the pipeline stops (r then stays
// uncommitted): a failed record is never dropped.
func (c offsetCommits) deliverFailure(t *task, r *kgo.Record, topic string, hs []kgo.RecordHeader, count counter, tr *tracing.Attempt, kind string, f failure) {
	p := c.p
	p.log.Debug("failed record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "to", topic)
	var attempt func(backoff time.Duration)
	attempt = func(backoff time.Duration) {
		tp, ts, sent := tr.Produce(kind, topic)
		fr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: withTraceContext(hs, tp, ts), Partition: -1}
		p.cl.Produce(context.Background(), fr, func(pr *kgo.Record, err error) {
			sent(pr.Partition, pr.Offset, err)
			if err == nil {
				count(&p.stats).Add(1)
				count(t.ps).Add(1)
				t.finish(r)
				tr.End(kind, f.kind, f.msg)
				return
			}
			again := !p.stopped.Load() && p.bg.Go(func() {
				select {
				case <-time.After(backoff):
					attempt(min(backoff*2, 30*time.Second))
				case <-p.quit:
					p.log.Error("producing a failed record failed at shutdown; it stays uncommitted", "to", topic, "offset", r.Offset, "err", err)
				}
			})
			if !again {
				p.log.Error("producing a failed record during shutdown failed; it stays uncommitted", "to", topic, "offset", r.Offset, "err", err)
				return
			}
			p.log.Error("producing a failed record failed; retrying", "to", topic, "offset", r.Offset, "err", err, "backoff", backoff)
		})
	}
	attempt(time.Second)
}
