// consume: share (RATIONALE.md, "Share groups"; DESIGN.md, "The share
// path"): a pipeline whose records come from a share group (KIP-932). The
// broker hands every member records of every partition under a lock; the
// host acknowledges each one — ACCEPT once its outcome is durable, RELEASE
// when it cannot finish it — and renews the locks of records that wait.
// Everything between the poll and the acknowledgement is the consumer-group
// path: tasks, workers, pools, async, failures, tracing.

package scheduler

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/scheduler/internal/commit"
	"github.com/wasmstream/wasmstream/scheduler/internal/ledger"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/source"
)

// shareClientOpts are the client options of a share-group member that
// polls at most maxRecords a poll (source.MemberRecords), after the base
// ones (kafkaconn.NewClient).
func shareClientOpts(p *Pipeline, maxRecords int) []kgo.Opt {
	return []kgo.Opt{
		// The inputs are added by Pipeline.Start, as for a consumer group:
		// the member joins only once the pipeline is built.
		kgo.ShareGroup(p.member.group),
		// At most this member's part of max_records locks at a time, and
		// no fetch ahead: records a poll did not ask for would sit locked,
		// their locks running.
		kgo.ShareMaxRecords(int32(maxRecords)),
		kgo.ShareMaxRecordsStrict(),
		// A poll's bytes within the task's bound too (the broker still
		// returns one record larger than this).
		kgo.FetchMaxBytes(int32(min(p.pc.MaxInFlightBytes, 50<<20))), // 50 MiB: the client's default and most
		kgo.ShareAckCallback(p.shareAckResults),
		kgo.FetchMaxWait(p.cfg.Kafka.FetchMaxWait),
		// No linger on the outputs: the next poll waits for the last
		// record of this one to be accepted, i.e. for its outputs to be
		// acknowledged, so the client's default 10 ms linger stood in
		// every poll's barrier (BenchmarkShare, 500 records a poll, 10 ms
		// lookups: 0.59× → 0.73× the consumer group's rate, p50 44 → 29
		// ms, medians of three interleaved rounds). Batches still form
		// behind a produce request in flight.
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(newOutputPartitioner()),
		kgo.ProducerBatchMaxBytesFn(p.member.limits.BatchMax),
		kgo.WithLogger(kgoLogger{p.log}),
		kgo.WithHooks(readHook{&p.counters.stats.Read}, p.counters.health),
	}
}

// newShareMember makes p a share-group member: its client, its role (the
// broker's delivery count is the attempt), its source, ledger and
// committer. The client is the first of the host's members of the group
// for p and produces p's outputs; the source makes the second
// (source.Share, RATIONALE.md, "Two members, polls that overlap") with
// the same options, once p starts.
func newShareMember(p *Pipeline, brokers []string, extra ...kgo.Opt) error {
	per := source.MemberRecords(p.pc.Share.MaxRecords)
	cl, err := kafkaconn.NewClient(p.cfg.Kafka, brokers, append(shareClientOpts(p, per[0]), extra...)...)
	if err != nil {
		return err
	}
	dial := func(maxRecords int) (*kgo.Client, error) {
		cl, err := kafkaconn.NewClient(p.cfg.Kafka, brokers, append(shareClientOpts(p, maxRecords), extra...)...)
		if err == nil {
			cl.AddConsumeTopics(p.pc.Inputs...)
		}
		return cl, err
	}
	p.role = partition.ShareRole{Role: p.role}
	p.member.cl = cl
	// One task, made at the first poll, takes every record
	// (partition.PoolTP): a share group hands out records of any partition
	// in any mix, and ordering: none binds none of them to a partition.
	p.tasks = partition.NewPool(&p.life.stopped)
	locks := ledger.NewShareLocks(p.log)
	p.src = source.NewShare(p.sourceDeps(), locks, dial)
	p.commit = commit.NewShareAcks(p.commitDeps(), locks)
	p.ledger = ledger.Share{Locks: locks, Log: p.log}
	return nil
}

// shareAckResults counts and logs the acknowledgements the broker refused
// (a lock that lapsed, a leader that moved): those records are redelivered.
func (p *Pipeline) shareAckResults(_ *kgo.Client, rs kgo.ShareAckResults) {
	c, ok := p.src.(*source.Share)
	if !ok {
		return
	}
	for _, r := range rs {
		if r.Err != nil {
			c.Locks().Stats.AckErrors.Add(1)
			p.log.Warn("share acknowledgement failed; the broker redelivers those records (at-least-once)", "topic", r.Topic, "partition", r.Partition, "err", r.Err)
		}
	}
}

// ShareStats are the pipeline's share-group counters; nil unless consume:
// share.
func (p *Pipeline) ShareStats() *ShareStats {
	if c, ok := p.src.(*source.Share); ok {
		return &c.Locks().Stats
	}
	return nil
}
