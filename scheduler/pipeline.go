// Package scheduler runs pipelines: it consumes input partitions as a
// consumer-group member, runs one task per assigned partition that feeds
// records to WebAssembly instances, produces what they emit, dead-letters
// what fails, and commits offsets only up to records whose outcome is
// durable. DESIGN notes live in RATIONALE.md at the repository root.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tracing"
)

type tp struct {
	topic     string
	partition int32
}

// Stats are a pipeline's counters since it started. Safe for concurrent use.
type Stats struct {
	Fetched atomic.Int64 // records handed to tasks
	// Read counts the records the client decoded from fetch responses:
	// Fetched plus what it read again (data of a paused partition is
	// dropped and fetched again) and the records of a batch before the
	// offset asked for.
	Read       atomic.Int64
	Done       atomic.Int64 // records whose outcome is durable (output or dead letter acknowledged)
	Outputs    atomic.Int64 // output records acknowledged by the broker
	DeadLetter atomic.Int64 // records acknowledged on the dead-letter topic
	Faults     atomic.Int64 // guest faults (each discarded an instance)
	Commits    atomic.Int64 // successful offset commits
	Skipped    atomic.Int64 // records skipped because a previous owner recorded them done
	Retried    atomic.Int64 // records acknowledged on a retry topic (or retried inline)
	Restarted  atomic.Int64 // records restarted because their instance was discarded while they waited
	Borrowed   atomic.Int64 // instances borrowed above the tasks' minimums (records waited)
	Released   atomic.Int64 // borrowed instances given back after instances.idle_timeout without a record
	// ForgedHeaders counts wasmstream.* headers not believed: any on an
	// input topic, malformed ones on a retry topic (scheduler/headers.go).
	ForgedHeaders atomic.Int64

	TxnCommitted atomic.Int64 // transactions committed (exactly_once)
	TxnAborted   atomic.Int64 // transactions aborted (exactly_once): their records are processed again
}

// Snapshot is a point-in-time view of a pipeline.
type Snapshot struct {
	Name       string
	Fetched    int64
	Read       int64 // records decoded from fetch responses (Stats.Read)
	Done       int64
	Outputs    int64
	DeadLetter int64
	Faults     int64
	Commits    int64
	Skipped    int64
	Retried    int64
	Restarted  int64
	Borrowed   int64 // instances borrowed because records waited
	Released   int64 // instances given back after instances.idle_timeout without a record
	// Transactions committed and aborted (exactly_once pipelines).
	TxnCommitted int64
	TxnAborted   int64
	InFlight     int64 // fetched by the current owner and not yet done
	Queued       int64 // fetched and waiting to start
	Lag          int64 // records behind the partitions' high watermarks
	Tasks        int
	Instances    int // live instances across the pipeline's tasks
	Busy         int // instances running a record
	Paused       int // partitions whose fetching is paused (backpressure)
	// instances: auto: the sum of the tasks' chosen maximums, and why the
	// most recent change of one was made (with its figures); 0 and ""
	// with fixed pools.
	TargetInstances int
	PoolReason      string
	// async.max_in_flight: auto: the operations in flight per instance
	// chosen, and why it last changed; 0 and "" with a fixed bound.
	AsyncLimit  int
	AsyncReason string
}

// Pipeline runs one configured pipeline as one consumer-group member.
type Pipeline struct {
	cfg *config.Config
	pc  *config.Pipeline
	ver atomic.Pointer[modVersion] // the current module version

	swapCh atomic.Pointer[chan struct{}] // closed at a swap, then replaced
	cl     *kgo.Client
	log    *slog.Logger
	group  string

	mu    sync.Mutex // guards tasks
	tasks map[tp]*task

	commitMu sync.Mutex // one commit at a time; held across revoke's drain+commit

	stats Stats

	psMu  sync.Mutex
	parts map[tp]*Stats // per partition, kept across assignments (metrics)

	budget        *Budget
	instanceBytes int64 // memory an instance reserves in the budget
	// secondary marks a retry pipeline: it consumes the retry topics of the
	// pipeline pc describes, holds each record until it is due, and takes the
	// attempt number from the record's headers.
	secondary bool
	retryable map[string]bool // fault kinds retried
	// async is set once any version of the module starts asynchronous
	// operations; a deploy (admin API goroutine) sets it while workers read it.
	async atomic.Bool
	// asyncSize is async.max_in_flight: auto's controller (nil: the fixed
	// bound).
	asyncSize *asyncSizer
	tracer    *tracing.Tracer // nil: tracing off
	metrics   *Metrics        // nil: no metrics
	flow      chan struct{}

	pollCancel context.CancelFunc
	pollDone   chan struct{}
	stopCommit chan struct{}
	wg         sync.WaitGroup // committer and tasks
	stopped    atomic.Bool

	// Exactly once (txn.go).
	eos          bool
	sess         *kgo.GroupTransactSession
	txnID        string
	txnGate      sync.RWMutex // held shared by releases, exclusively by a cut
	txnErr       atomic.Pointer[error]
	released     atomic.Int64 // records released since the last cut
	revokedSince atomic.Bool  // partitions revoked or lost since the last cut
	pollStop     atomic.Pointer[context.CancelFunc]
	failed       atomic.Bool
	onFail       func(error)
}

// NewPipeline creates the pipeline's client; Start begins consuming.
func NewPipeline(cfg *config.Config, pc *config.Pipeline, mod *host.Module, budget *Budget, brokers []string, log *slog.Logger, extra ...kgo.Opt) (*Pipeline, error) {
	p := &Pipeline{
		budget: budget,
		// An instance reserves its linear memory and its tables at their bounds.
		instanceBytes: int64(pc.Limits.MemoryPages)*65536 + host.Limits{TableElements: pc.Limits.TableElements}.TableBytes(),
		flow:          make(chan struct{}, 1),
		retryable:     map[string]bool{},
		cfg:           cfg,
		pc:            pc,
		log:           log.With("pipeline", pc.Name),
		group:         cfg.GroupID(pc),
		tasks:         map[tp]*task{},
		pollDone:      make(chan struct{}),
		stopCommit:    make(chan struct{}),
	}
	if pc.Async.AutoInFlight {
		p.asyncSize = newAsyncSizer(pc.Async.MaxInFlight)
	}
	p.ver.Store(&modVersion{m: mod})
	sc := make(chan struct{})
	p.swapCh.Store(&sc)
	p.async.Store(mod.Info().Async)
	for _, f := range pc.Retry.RetryableFaults {
		p.retryable["fault."+f] = true
	}
	reset := kgo.NewOffset().AtStart()
	if cfg.Kafka.StartOffset == "latest" {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(cfg.Kafka.ClientID),
		kgo.ConsumerGroup(p.group),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(cfg.Kafka.FetchMaxWait),
		kgo.SessionTimeout(cfg.Kafka.SessionTimeout),
		kgo.RebalanceTimeout(cfg.Kafka.RebalanceTimeout),
		kgo.OnPartitionsAssigned(p.onAssigned),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.RecordPartitioner(newOutputPartitioner()),
		kgo.WithLogger(kgoLogger{p.log}),
		kgo.WithHooks(readHook{&p.stats.Read}),
		// Records of aborted transactions upstream are never processed.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
	opts = append(opts, extra...)
	if pc.Guarantee == config.ExactlyOnce {
		p.eos = true
		p.txnID = pc.Transactions.ID
		if p.txnID == "" {
			p.txnID = p.group + "." + cfg.Host.ID
		}
		opts = append(opts, kgo.TransactionalID(p.txnID), kgo.TransactionTimeout(pc.Transactions.Timeout), kgo.RequireStableFetchOffsets())
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: kafka client: %w", pc.Name, err)
		}
		p.sess, p.cl = sess, sess.Client()
		return p, nil
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: kafka client: %w", pc.Name, err)
	}
	p.cl = cl
	return p, nil
}

// Name is the pipeline's name.
func (p *Pipeline) Name() string { return p.pc.Name }

// Start begins consuming. Call once.
func (p *Pipeline) Start() {
	// Topics are added only now, so the group is joined (and the partition
	// callbacks can run) only once the pipeline is fully built.
	p.cl.AddConsumeTopics(p.pc.Inputs...)
	ctx, cancel := context.WithCancel(context.Background())
	p.pollCancel = cancel
	if p.eos {
		go p.txnLoop(ctx)
		p.wg.Add(1)
		go p.flowLoop()
		return
	}
	go p.pollLoop(ctx)
	p.wg.Add(2)
	go p.commitLoop()
	go p.flowLoop()
}

func (p *Pipeline) signalFlow() {
	select {
	case p.flow <- struct{}{}:
	default:
	}
}

// flowLoop resumes paused partitions once they drained (RATIONALE.md,
// "Backpressure"). It runs on a signal from finishing records and every 50ms,
// because the host-wide bound can clear without this pipeline finishing
// anything.
func (p *Pipeline) flowLoop() {
	defer p.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stopCommit:
			return
		case <-p.flow:
		case <-tick.C:
		}
		p.mu.Lock()
		for _, t := range p.tasks {
			t.maybeResume()
			t.dispatch() // a safety net: the task's kick timer runs it when records fall due or wait
		}
		p.mu.Unlock()
	}
}

// pollLoop fetches records and hands each partition's records to its task.
// With BlockRebalanceOnPoll no rebalance runs between a poll and
// AllowRebalance, so a batch is never dispatched to a task that was revoked
// after the poll returned it.
func (p *Pipeline) pollLoop(ctx context.Context) {
	defer close(p.pollDone)
	var lastErr time.Time
	for {
		fetches := p.cl.PollRecords(ctx, 10000)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			p.cl.AllowRebalance()
			return
		}
		p.logFetchErrors(fetches, &lastErr)
		p.dispatch(fetches)
		p.cl.AllowRebalance()
	}
}

// logFetchErrors logs fetch errors, at most one every 5 s (lastErr); a
// poll's own context ending is not one.
func (p *Pipeline) logFetchErrors(fetches kgo.Fetches, lastErr *time.Time) {
	fetches.EachError(func(t string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if time.Since(*lastErr) > 5*time.Second {
			*lastErr = time.Now()
			p.log.Warn("fetch error", "topic", t, "partition", part, "err", err)
		}
	})
}

// dispatch hands each partition's fetched records to its task.
func (p *Pipeline) dispatch(fetches kgo.Fetches) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		t := p.tasks[tp{fp.Topic, fp.Partition}]
		if t == nil {
			return // not ours: the records are left uncommitted for the owner
		}
		if fp.HighWatermark > 0 {
			t.highWatermark.Store(fp.HighWatermark)
		}
		if len(fp.Records) > 0 {
			t.enqueue(fp.Records)
		}
	})
}

func (p *Pipeline) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	skips := p.doneSets(ctx, assigned)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped.Load() {
		return
	}
	for topic, parts := range assigned {
		for _, part := range parts {
			k := tp{topic, part}
			if p.tasks[k] != nil {
				continue
			}
			t := newTask(p, topic, part, skips[k])
			p.tasks[k] = t
			t.start()
			p.log.Debug("partition assigned", "topic", topic, "partition", part, "skip", skips[k].count())
		}
	}
}

// doneSets reads the group's committed offsets for the assigned partitions
// and decodes the done offsets recorded above them, so the new task skips
// them. Failure to read them costs duplicates, not correctness.
func (p *Pipeline) doneSets(ctx context.Context, assigned map[string][]int32) map[tp]*doneSet {
	out := map[tp]*doneSet{}
	if !*p.cfg.Kafka.RecordDoneOffsets || p.eos {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(p.cl).FetchOffsets(ctx, p.group)
	if err != nil {
		p.log.Warn("reading committed done offsets failed; records done by the previous owner may be processed again", "err", err)
		return out
	}
	for topic, parts := range assigned {
		for _, part := range parts {
			o, ok := resp.Lookup(topic, part)
			if !ok || o.Err != nil || o.Metadata == "" {
				continue
			}
			d, err := decodeDone(o.Metadata, o.At)
			if err != nil {
				if err != errNotOurs {
					p.log.Warn("ignoring unreadable commit metadata", "topic", topic, "partition", part, "err", err)
				}
				continue
			}
			out[tp{topic, part}] = d
		}
	}
	return out
}

func (p *Pipeline) detach(parts map[string][]int32) []*task {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*task
	for topic, ps := range parts {
		for _, part := range ps {
			k := tp{topic, part}
			if t := p.tasks[k]; t != nil {
				out = append(out, t)
				delete(p.tasks, k)
			}
		}
	}
	return out
}

// onRevoked drains the revoked partitions' tasks (in-flight records finish
// within shutdown.drain_timeout, queued ones are left for the next owner)
// and commits what is done before the partitions move. It also runs for
// every partition when the pipeline leaves the group on shutdown.
func (p *Pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if p.eos {
		p.revokeTxn(revoked)
		return
	}
	tasks := p.detach(revoked)
	if len(tasks) == 0 {
		return
	}
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	p.drain(tasks)
	if err := p.commitTasks(ctx, tasks); err != nil {
		p.log.Error("commit on revoke failed; the new owner will process the uncommitted records again", "err", err)
	}
	for _, t := range tasks {
		t.close()
	}
	for _, t := range tasks {
		p.log.Debug("partition revoked", "topic", t.topic, "partition", t.partition)
	}
}

// onLost abandons the partitions: another member may already own them, so
// nothing is committed.
func (p *Pipeline) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if p.eos {
		p.revokeTxn(lost)
		return
	}
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
}

// drain stops tasks, waits up to the drain deadline for their records in
// progress to finish and for the produces those records need to be
// acknowledged, then aborts whatever is still running.
func (p *Pipeline) drain(tasks []*task) {
	deadline := time.Now().Add(p.cfg.Shutdown.DrainTimeout)
	for _, t := range tasks {
		t.stop()
	}
	for _, t := range tasks {
		if !t.waitWorkers(deadline) {
			p.log.Warn("drain deadline reached; interrupting the records in progress", "topic", t.topic, "partition", t.partition)
			t.abort()
			t.waitWorkers(time.Now().Add(time.Minute))
		}
	}
	for _, t := range tasks {
		for t.startedPending() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := t.startedPending(); n > 0 {
			p.log.Warn("drain deadline reached with produces unacknowledged; those records stay uncommitted", "topic", t.topic, "partition", t.partition, "records", n)
		}
	}
}

func (p *Pipeline) commitLoop() {
	defer p.wg.Done()
	tick := time.NewTicker(p.cfg.Kafka.CommitInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.stopCommit:
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
			if err := p.commitTasks(ctx, tasks); err != nil {
				p.log.Warn("commit failed; will retry", "err", err)
			}
			cancel()
			p.commitMu.Unlock()
		}
	}
}

// commitTasks commits each task's watermark, with the done offsets above it
// in the commit metadata, if either changed. Callers hold commitMu.
func (p *Pipeline) commitTasks(ctx context.Context, tasks []*task) error {
	type mark struct {
		t    *task
		off  int64
		meta string
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	metas := map[tp]string{}
	var marks []mark
	for _, t := range tasks {
		off, epoch, above, ok := t.tr.commitPoint()
		if !ok {
			continue
		}
		var meta string
		if *p.cfg.Kafka.RecordDoneOffsets {
			meta, _ = encodeDone(off, above, p.cfg.Kafka.CommitMetadataMaxBytes)
		}
		if off == t.committed && meta == t.committedMeta {
			continue
		}
		if offsets[t.topic] == nil {
			offsets[t.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[t.topic][t.partition] = kgo.EpochOffset{Epoch: epoch, Offset: off}
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
	p.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
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
		m.t.committed, m.t.committedMeta = m.off, m.meta
	}
	p.stats.Commits.Add(1)
	return nil
}

// Stop shuts the pipeline down in stages: stop fetching; leave the group,
// which revokes every partition (drain within shutdown.drain_timeout, then
// commit what is done); close the client.
func (p *Pipeline) Stop(ctx context.Context) {
	if !p.stopped.CompareAndSwap(false, true) {
		return
	}
	if p.eos {
		p.stopTxn(ctx)
		return
	}
	if p.pollCancel != nil {
		p.pollCancel()
		<-p.pollDone
	}
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
		p.onRevoked(ctx, p.cl, all)
	}
	close(p.stopCommit)
	p.wg.Wait()
	p.cl.Close()
}

// Snapshot returns the pipeline's counters and gauges.
func (p *Pipeline) Snapshot() Snapshot {
	s := Snapshot{
		Name:       p.pc.Name,
		Fetched:    p.stats.Fetched.Load(),
		Read:       p.stats.Read.Load(),
		Done:       p.stats.Done.Load(),
		Outputs:    p.stats.Outputs.Load(),
		DeadLetter: p.stats.DeadLetter.Load(),
		Faults:     p.stats.Faults.Load(),
		Commits:    p.stats.Commits.Load(),
		Skipped:    p.stats.Skipped.Load(),
		Retried:    p.stats.Retried.Load(),
		Restarted:  p.stats.Restarted.Load(),
		Borrowed:   p.stats.Borrowed.Load(),
		Released:   p.stats.Released.Load(),

		TxnCommitted: p.stats.TxnCommitted.Load(),
		TxnAborted:   p.stats.TxnAborted.Load(),
	}
	if p.asyncSize != nil {
		var reason, detail string
		s.AsyncLimit, reason, detail = p.asyncSize.state()
		s.AsyncReason = reason + ": " + detail
	}
	var lastChange time.Time
	p.mu.Lock()
	for _, t := range p.tasks {
		s.Tasks++
		s.Lag += t.lag()
		if target, reason, detail, at, ok := t.sizeState(); ok {
			s.TargetInstances += target
			if s.PoolReason == "" || at.After(lastChange) {
				lastChange = at
				s.PoolReason = fmt.Sprintf("%s[%d] %s: %s", t.topic, t.partition, reason, detail)
			}
		}
		workers, busy, inFlight, queued, paused := t.counts()
		s.Instances += workers
		s.Busy += busy
		s.InFlight += int64(inFlight)
		s.Queued += int64(queued)
		if paused {
			s.Paused++
		}
	}
	p.mu.Unlock()
	return s
}

// partitionStats returns the counters of a partition.
func (p *Pipeline) partitionStats(topic string, partition int32) *Stats {
	p.psMu.Lock()
	defer p.psMu.Unlock()
	if p.parts == nil {
		p.parts = map[tp]*Stats{}
	}
	s := p.parts[tp{topic, partition}]
	if s == nil {
		s = &Stats{}
		p.parts[tp{topic, partition}] = s
	}
	return s
}

// Client is the pipeline's Kafka client (tests and tools).
func (p *Pipeline) Client() *kgo.Client { return p.cl }

// readHook counts the records the client decodes from fetch responses.
type readHook struct{ n *atomic.Int64 }

func (h readHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.n.Add(int64(m.NumRecords))
}

type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, kv...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, kv...)
	default:
		k.l.Debug(msg, kv...)
	}
}
