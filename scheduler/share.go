// consume: share (RATIONALE.md, "Share groups"; DESIGN.md, "The share
// path"): a pipeline whose records come from a share group (KIP-932). The
// broker hands every member records of every partition under a lock; the
// host acknowledges each one — ACCEPT once its outcome is durable, RELEASE
// when it cannot finish it — and renews the locks of records that wait.
// Everything between the poll and the acknowledgement is the consumer-group
// path: tasks, workers, pools, async, failures, tracing.

package scheduler

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/scheduler/internal/commit"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// shareSource is the source of a consume: share pipeline: its poll loop
// and the locks of the records it holds (shareLocks), which its ledger
// (shareLedger) takes as records are acknowledged. Outputs and failure
// copies are produced as under offset commits (the pipeline's sink is a
// plainSink); what differs is how a record becomes durable: its
// acknowledgement instead of a watermark.
type shareSource struct {
	p     *Pipeline
	locks *partition.ShareLocks
}

// shareClientOpts are the client options of a share-group member, after
// the base ones (kafkaconn.NewClient).
func shareClientOpts(p *Pipeline) []kgo.Opt {
	return []kgo.Opt{
		// The inputs are added by Pipeline.Start, as for a consumer group:
		// the member joins only once the pipeline is built.
		kgo.ShareGroup(p.group),
		// At most max_records locks at a time, and no fetch ahead: records
		// a poll did not ask for would sit locked, their locks running.
		kgo.ShareMaxRecords(int32(p.pc.Share.MaxRecords)),
		kgo.ShareMaxRecordsStrict(),
		// A poll's bytes within the task's bound too (the broker still
		// returns one record larger than this).
		kgo.FetchMaxBytes(int32(min(p.pc.MaxInFlightBytes, 50<<20))), // 50 MiB: the client's default and most
		kgo.ShareAckCallback(p.shareAckResults),
		kgo.FetchMaxWait(p.cfg.Kafka.FetchMaxWait),
		kgo.RecordPartitioner(newOutputPartitioner()),
		kgo.ProducerBatchMaxBytesFn(p.limits.BatchMax),
		kgo.WithLogger(kgoLogger{p.log}),
		kgo.WithHooks(readHook{&p.stats.Read}, p.health),
	}
}

// newShareMember makes p a share-group member: its client, its role (the
// broker's delivery count is the attempt), its source, ledger and
// committer.
func newShareMember(p *Pipeline, brokers []string, extra ...kgo.Opt) error {
	cl, err := kafkaconn.NewClient(p.cfg.Kafka, brokers, append(shareClientOpts(p), extra...)...)
	if err != nil {
		return err
	}
	p.role = partition.ShareRole{Role: p.role}
	p.cl = cl
	src := &shareSource{p: p, locks: partition.NewShareLocks(p.log)}
	p.src, p.commit = src, commit.NewShareAcks(p.commitDeps(), src.locks)
	p.ledger = partition.ShareLedger{Locks: src.locks, Log: p.log}
	return nil
}

// shareAckResults counts and logs the acknowledgements the broker refused
// (a lock that lapsed, a leader that moved): those records are redelivered.
func (p *Pipeline) shareAckResults(_ *kgo.Client, rs kgo.ShareAckResults) {
	c, ok := p.src.(*shareSource)
	if !ok {
		return
	}
	for _, r := range rs {
		if r.Err != nil {
			c.locks.Stats.AckErrors.Add(1)
			p.log.Warn("share acknowledgement failed; the broker redelivers those records (at-least-once)", "topic", r.Topic, "partition", r.Partition, "err", r.Err)
		}
	}
}

// run is the poll loop: it polls only once every record of the previous
// poll is acknowledged (a poll accepts whatever of the previous one is not)
// and while the host is under host.max_in_flight, registers the records'
// locks, and hands the records to the pipeline's one task (sharePool): a
// share group has no assignment callbacks, and every member may get records
// of every partition.
func (c *shareSource) run(ctx context.Context) {
	p := c.p
	p.wg.Add(2)
	go c.renewLoop()
	go p.flowLoop()
	defer close(p.pollDone)
	c.setStartOffset(ctx)
	var lastErr time.Time
	for {
		if !c.awaitAcks(ctx) {
			return
		}
		fetches := p.cl.PollRecords(ctx, p.pc.Share.MaxRecords)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			// A record this poll returned stays held: stop releases it.
			c.locks.Add(fetches, time.Now())
			return
		}
		p.logFetchErrors(fetches, &lastErr)
		c.locks.Add(fetches, time.Now())
		c.dispatch(fetches)
	}
}

// setStartOffset makes kafka.start_offset the share group's
// share.auto.offset.reset (where a share group with no state starts; the
// broker's default is latest), as it is a consumer group's reset offset.
// It is set at every start, before the member's first poll; a refusal (the
// host lacks ALTER_CONFIGS on the group) is logged, not fatal.
func (c *shareSource) setStartOffset(ctx context.Context) {
	p := c.p
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, p.group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(p.cfg.Kafka.StartOffset)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, p.cl)
	if err == nil && len(resp.Resources) == 1 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		p.log.Warn("could not set the share group's share.auto.offset.reset from kafka.start_offset (the host needs ALTER_CONFIGS on the group); a new group starts where the broker's default says",
			"group", p.group, "start_offset", p.cfg.Kafka.StartOffset, "err", err)
	}
}

// awaitAcks returns once no acquired record is held and the host is under
// host.max_in_flight, or false when ctx ends first.
func (c *shareSource) awaitAcks(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.locks.Len() > 0 || c.p.budget.OverInFlight() {
		select {
		case <-ctx.Done():
			return false
		case <-c.locks.Empty:
		case <-tick.C:
		}
	}
	return true
}

// sharePool is the key of a consume: share pipeline's one task (its
// metrics report topic "*", partition -1): a share group hands out records
// of any partition in any mix, and ordering: none binds none of them to a
// partition, so one pool of instances takes them all (instances sizes it).
var sharePool = tp{"*", -1}

// dispatch hands the poll's records to the pipeline's one task, creating it
// at the first poll.
func (c *shareSource) dispatch(fetches kgo.Fetches) {
	p := c.p
	if fetches.NumRecords() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tasks[sharePool]
	if t == nil {
		t = partition.NewTask(p.eng, sharePool.topic, sharePool.partition, nil)
		p.tasks[sharePool] = t
		t.Start()
	}
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) > 0 {
			t.EnqueueShared(fp.Records)
		}
	})
}

// renewLoop keeps the held records' locks alive until the pipeline quits.
func (c *shareSource) renewLoop() {
	p := c.p
	defer p.wg.Done()
	tick := time.NewTicker(c.locks.RenewInterval())
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
			return
		case now := <-tick.C:
			if c.locks.Renew(now) > 0 {
				// Sent now, not with the next batch of acknowledgements.
				ctx, cancel := context.WithTimeout(context.Background(), c.locks.RenewInterval()*5)
				if err := p.cl.FlushAcks(ctx); err != nil {
					p.log.Debug("sending lock renewals", "err", err)
				}
				cancel()
			}
			tick.Reset(c.locks.RenewInterval())
		}
	}
}

// leave sends the last acknowledgements (Final released what the host
// still held), then leaves the share group.
func (c *shareSource) leave(ctx context.Context) {
	p := c.p
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	if err := p.cl.FlushAcks(fctx); err != nil {
		p.log.Warn("sending the last acknowledgements; records not acknowledged are redelivered after their lock", "err", err)
	}
	cancel()
	if err := p.cl.LeaveGroupContext(ctx); err != nil {
		p.log.Warn("leaving the share group", "err", err)
	}
}

// ShareStats are the pipeline's share-group counters; nil unless consume:
// share.
func (p *Pipeline) ShareStats() *ShareStats {
	if c, ok := p.src.(*shareSource); ok {
		return &c.locks.Stats
	}
	return nil
}
