// Package scheduler runs pipelines: it consumes input partitions as a
// consumer-group member, runs one task per assigned partition that feeds
// records to WebAssembly instances, produces what they emit, dead-letters
// what fails, and commits offsets only up to records whose outcome is
// durable. DESIGN.md at the repository root follows a record through these
// files; RATIONALE.md says why.
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

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/commit"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/ledger"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/schemaio"
	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
	"github.com/wasmstream/wasmstream/scheduler/internal/source"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// tp names a partition.
type tp = partition.TP

// Snapshot is a point-in-time view of a pipeline.
type Snapshot struct {
	Name       string
	Fetched    int64
	Read       int64 // records decoded from fetch responses (Stats.Read)
	Done       int64
	Outputs    int64
	Dropped    int64 // records the module decided ok with no output (filtered)
	DeadLetter int64
	Faults     int64
	Commits    int64
	Skipped    int64
	Retried    int64
	Restarted  int64
	Borrowed   int64 // instances borrowed because records waited
	Released   int64 // instances given back after instances.idle_timeout without a record
	HeldBack   int64 // times polling waited because no task took more records (backpressure)
	Pauses     int64 // times a partition's fetching was paused
	// Calls that ran several records, and the records they ran (Stats.Runs).
	Runs       int64
	RunRecords int64
	HandedBack int64 // records not yet run that a run gave back for other instances (Stats.HandedBack)
	// Transactions committed and aborted (exactly_once pipelines).
	TxnCommitted int64
	TxnAborted   int64
	TxnSettled   int64 // of them, ends that were unconfirmed and settled (the offsets read back from the broker)
	Rebuilds     int64 // times rebuilt with a new client (Stats.Rebuilds)
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
	// BrokerErrors are the brokers the pipeline's client met errors with
	// (since the start); Stalled, the partitions that stopped moving while
	// records waited, and where those wait (health.go).
	BrokerErrors []BrokerErrors
	Stalled      []StalledPartition
	// The counters of state.enabled pipelines (Stats.State*):
	// StateRestoreNanos is the wall time restores took.
	StateWrites         int64
	StateRestored       int64
	StateRestoreNanos   int64
	StateRestoreSkipped int64
	StateFlushFailures  int64
	StateRefused        int64
	// TimersSet, TimersFired, TimersFailed, TimersIdleRounds: as Stats'
	// (event-time timers, ABI.md §4.2).
	TimersSet        int64
	TimersFired      int64
	TimersFailed     int64
	TimersIdleRounds int64
	// ForgedHeaders, SchemaDecodeFailures, SchemaEncodeFailures: as
	// Stats'.
	ForgedHeaders        int64
	SchemaDecodeFailures int64
	SchemaEncodeFailures int64
}

// Pipeline runs one configured pipeline as one consumer-group member.
type Pipeline struct {
	cfg *config.Config
	pc  *config.Pipeline
	log *slog.Logger
	// role: a primary pipeline, or a primary's retry tier (scheduler/internal/partition/role.go).
	role partition.Role

	// mods: the current version, the swap signal, a canary, whether
	// the module is asynchronous (swap.go); its engines read them. A
	// pipeline rebuilt after its member failed (rebuild.go) shares them
	// with the one it replaces, so a deploy or canary reaches both.
	mods *modules
	// flow: the poll loop's wake-ups (scheduler/internal/source).
	flow partition.FlowSignals
	// eng is what the partitions' engines are given (engine.go): made by
	// Start, before any task. Until then it holds what newPipeline
	// resolved for them: the schema-registry codec (eng.Schema).
	eng *partition.Deps

	// member is its client and its group.
	member    pipeMember
	pipeSeams // source, ledger, sink, committer (Pipeline.wire)
	// shared is what its engines share besides the seams: bounds,
	// observers.
	shared pipeShared
	// subs are the subscribers to its commits and to partitions that
	// leave, and the state stores that subscribe.
	subs pipeSubscribers

	// tasks are its tasks by partition (the task map), handed whole to
	// its source and committer.
	tasks *partition.Set

	// counters, per pipeline and per partition; broker health. A rebuilt
	// pipeline shares them with the one it replaces: its counters go on.
	counters *pipeCounters

	life pipeLife // its goroutines and shutdown
}

// pipeMember is a pipeline's Kafka client and its group.
type pipeMember struct {
	cl    *kgo.Client
	group string
	// instanceID is the static member id (kafka.static_membership), ""
	// for a dynamic member; brokers reach the group to leave it.
	instanceID string
	brokers    []string
	// limits are what the brokers refuse on the topics the pipeline
	// produces to (scheduler/internal/partition/topiclimits.go): the client's batch bound, and the
	// sink's checks.
	limits partition.TopicLimits
}

// pipeSeams are the pipeline's four seams, picked once by its wiring table
// (Pipeline.wire; DESIGN.md, "Seams: source, ledger, sink, committer").
type pipeSeams struct {
	// src is where records come from: a consumer group's poll loop or a
	// share group's (scheduler/internal/source).
	src source.Source
	// ledger is when a record's outcome counts: the offset tracker, the
	// transaction's, or the share group's acknowledgements (scheduler/internal/partition/ledger.go).
	ledger partition.Ledger
	// sink is how decided outcomes leave: plainSink or txnSink, by the
	// guarantee (scheduler/internal/partition/sink.go).
	sink partition.Sink
	// commit commits what the ledger counts: offset commits,
	// transactions, or a share group's acknowledgements
	// (scheduler/internal/commit).
	commit commit.Committer
}

// pipeShared is what the pipeline gives its engines (engineDeps) besides
// its seams, module versions and state stores.
type pipeShared struct {
	budget        *Budget
	instanceBytes int64           // memory an instance reserves in the budget
	retryable     map[string]bool // fault kinds retried
	// asyncSize is async.max_in_flight: auto's controller (nil: the fixed
	// bound).
	asyncSize *sizing.Async
	// hooks observe the record path (tracer, metrics, failure observer):
	// the runner's, all set before Start (Runner.RegisterMetrics,
	// Runner.ObserveFailures).
	hooks hooks.Hooks
}

// pipeSubscribers are told of the pipeline's commits and of partitions
// that leave it; the state stores subscribe (newStateStores). Set while
// the pipeline is built, read-only after.
type pipeSubscribers struct {
	// state is the partitions' state stores (state.enabled; nil otherwise).
	state *state.Stores
	// onCommitted are told each partition's newly committed offset, after
	// the commit (committed), with the state view of the task whose marks
	// were committed: the state stores flush from it (state.Stores.Flush,
	// which applies nothing unless that view is still the partition's
	// current one).
	onCommitted []func(partition int32, upTo int64, from *state.Partition)
	// onGone are told that partitions left the pipeline (revoked, lost:
	// gone), as soon as their tasks are detached; each may return what it
	// does only once the tasks' workers ended (after). The state stores
	// subscribe (state.Stores.Detach).
	onGone []func(parts []int32) (after func())
}

// gone tells the subscribers (onGone) that the partitions of tasks left
// the pipeline: the committers call it (commit.Deps.Gone) once they were
// handed the tasks of revoked or lost partitions; after runs what the
// subscribers do once the tasks' workers ended.
func (s *pipeSubscribers) gone(tasks []*partition.Task) (after func()) {
	if len(s.onGone) == 0 || len(tasks) == 0 {
		return func() {}
	}
	parts := make([]int32, len(tasks))
	for i, t := range tasks {
		parts[i] = t.Partition
	}
	afters := make([]func(), 0, len(s.onGone))
	for _, f := range s.onGone {
		afters = append(afters, f(parts))
	}
	return func() {
		for _, a := range afters {
			a()
		}
	}
}

// committed tells the subscribers (onCommitted) that the offsets below upTo
// of t's input partition are committed: offset commits and transactions
// call it (commit.Deps.OnCommitted) after a commit succeeded, under
// commitMu, never after an abort.
// t is the task whose marks were committed, which may be gone (its
// partition lost, and perhaps assigned again, while the commit was in
// flight: at_least_once's lost does not wait for commitMu): its state
// view, not the partition's, says what the commit covers.
func (s *pipeSubscribers) committed(t *partition.Task, upTo int64) {
	for _, f := range s.onCommitted {
		f(t.Partition, upTo, t.State)
	}
}

// pipeCounters are the pipeline's counters: its own, and each partition's
// (kept across assignments; the record path counts there); the client's
// errors per broker and the partitions that stopped moving (health.go).
type pipeCounters struct {
	stats  Stats
	psMu   sync.Mutex
	parts  map[tp]*Stats
	health *brokerHealth
	stall  stallTracker
}

// pipeLife is how a pipeline runs and ends: the poll loop (Source.Run) ends
// when pollCancel is called and closes pollDone; the flow and commit loops
// end when quit is closed and are waited for with wg; bg owns the rest.
type pipeLife struct {
	pollCancel context.CancelFunc
	pollDone   chan struct{}
	quit       chan struct{}
	wg         sync.WaitGroup
	bg         background.Group
	stopped    atomic.Bool

	// failed: the pipeline failed (fail) or broke (broke): nothing more
	// is committed.
	failed atomic.Bool
	onFail func(error)
	// onBroken is told, once, that the pipeline's member cannot go on
	// but a new one can (broke, rebuild.go); nil: fail instead.
	onBroken func(*Pipeline, error)
}

// pipelineDeps is what a pipeline is built from besides its config.
type pipelineDeps struct {
	cfg     *config.Config
	budget  *Budget
	brokers []string
	log     *slog.Logger
	hooks   hooks.Hooks // the runner's (a rebuild keeps the old pipeline's)
	onFail  func(error) // told of an error the pipeline cannot recover from
	// onBroken is told that the pipeline's member cannot go on but a new
	// one can (rebuild.go); nil: such an error fails the pipeline.
	onBroken func(*Pipeline, error)
	// from is the pipeline this one replaces (a rebuild): the new one
	// shares its module versions and counters, and its metrics and
	// failure observer; version is then unused.
	from *Pipeline
	role partition.Role
	// version is the module version the pipeline starts with: a primary's
	// retry tier shares its primary's, so that retiring it waits for both.
	version *modVersion
	// limits are what the brokers refuse on the topics produced to.
	limits partition.TopicLimits
	// schemaReg is the process's schema-registry client (nil: none).
	schemaReg *schemareg.Client
}

// newPipeline creates the pipeline and its client, whole; Start begins
// consuming.
func newPipeline(pc *config.Pipeline, d pipelineDeps, extra ...kgo.Opt) (*Pipeline, error) {
	cfg, log := d.cfg, d.log
	p := &Pipeline{
		cfg:    cfg,
		pc:     pc,
		log:    log.With("pipeline", pc.Name),
		role:   d.role,
		flow:   partition.NewFlowSignals(),
		member: pipeMember{group: cfg.GroupID(pc), limits: d.limits},
		shared: pipeShared{
			budget: d.budget,
			hooks:  d.hooks,
			// An instance reserves its linear memory and its tables at their bounds.
			instanceBytes: int64(pc.Limits.MemoryPages)*65536 + host.Limits{TableElements: pc.Limits.TableElements}.TableBytes(),
			retryable:     map[string]bool{},
		},
		life: pipeLife{pollDone: make(chan struct{}), quit: make(chan struct{}), onFail: d.onFail, onBroken: d.onBroken},
	}
	p.tasks = partition.NewSet(&p.life.stopped) // a share group's is a pool (newShareMember)
	if pc.Async.AutoInFlight {
		p.shared.asyncSize = sizing.NewAsync(pc.Async.MaxInFlight, pc.Instances.Auto || pc.Instances.Max > pc.Instances.Min)
	}
	if f := d.from; f != nil {
		p.mods, p.counters, p.shared.hooks = f.mods, f.counters, f.shared.hooks
	} else {
		p.mods, p.counters = &modules{}, &pipeCounters{health: newBrokerHealth()}
		p.mods.Ver.Store(d.version)
		sc := make(chan struct{})
		p.mods.SwapCh.Store(&sc)
		p.mods.Async.Store(d.version.M.Info().Async)
	}
	var stateDir string
	if pc.State.Enabled {
		dir, err := cfg.StateDir(pc)
		if err != nil {
			return nil, err
		}
		stateDir = dir
	}
	for _, f := range pc.Retry.RetryableFaults {
		p.shared.retryable["fault."+f] = true
	}
	p.member.brokers = d.brokers
	// The output subjects are resolved now: a registry that is down or a
	// subject that does not exist fails the start, naming the pipeline.
	schema, err := schemaio.New(context.Background(), d.schemaReg, cfg, pc)
	if err != nil {
		return nil, err
	}
	p.eng = &partition.Deps{Schema: schema}
	if err := p.wire(extra); err != nil {
		schema.Close()
		return nil, fmt.Errorf("pipeline %s: kafka client: %w", pc.Name, err)
	}
	if pc.State.Enabled {
		p.newStateStores(stateDir)
	}
	return p, nil
}

// wire is the pipeline's wiring table (DESIGN.md, "Seams: source, ledger,
// sink, committer"): its consume mode and guarantee pick its client, its
// source, ledger, sink and committer.
//
//	consume × guarantee         source        ledger          sink       committer
//	group × at_least_once       source.Group  ledger.Offsets  PlainSink  commit.Offsets
//	group × exactly_once        source.Group  ledger.Txn      TxnSink    commit.Transactions
//	share × at_least_once       source.Share  ledger.Share    PlainSink  commit.ShareAcks
func (p *Pipeline) wire(extra []kgo.Opt) error {
	pc := p.pc
	if pc.Consume == config.ConsumeShare {
		if err := newShareMember(p, p.member.brokers, extra...); err != nil {
			return err
		}
		p.sink = &partition.PlainSink{Producer: p.producer(), Limits: p.member.limits}
		return nil
	}
	var changelog string // the sinks check its records against its topic's limits
	if pc.State.Enabled {
		changelog = stateLimits(pc).Changelog
	}
	opts, err := p.groupClientOpts()
	if err != nil {
		return err
	}
	opts = append(opts, extra...)
	if pc.Guarantee == config.ExactlyOnce {
		txnID := pc.Transactions.ID
		if txnID == "" {
			txnID = p.member.group + "." + p.cfg.Host.ID
		}
		opts = append(opts, kgo.TransactionalID(txnID), kgo.TransactionTimeout(pc.Transactions.Timeout), kgo.RequireStableFetchOffsets())
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return err
		}
		p.member.cl = sess.Client()
		x := commit.NewTransactions(p.commitDeps(), sess, txnID)
		p.commit = x
		p.src = source.NewGroup(p.sourceDeps(), x)
		p.sink = &partition.TxnSink{Producer: p.producer(), Gate: x, Limits: p.member.limits, Changelog: changelog}
		p.ledger = ledger.Txn{}
		return nil
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	p.member.cl = cl
	c := commit.NewOffsets(p.commitDeps())
	p.commit = c
	p.src = source.NewGroup(p.sourceDeps(), c)
	p.sink = &partition.PlainSink{Producer: p.producer(), Limits: p.member.limits, Changelog: changelog}
	p.ledger = ledger.Offsets{Ordered: pc.Ordering == config.OrderPartition, DoneOffsets: *p.cfg.Kafka.RecordDoneOffsets}
	return nil
}

// producer is what p's sink produces with (made once p's client is).
func (p *Pipeline) producer() partition.Producer {
	return partition.Producer{Config: p.pc, Client: p.member.cl, Log: p.log, Background: &p.life.bg, Quit: p.life.quit, Stopped: &p.life.stopped}
}

// groupClientOpts are a consumer-group member's client options: the
// connection's, the group's (no auto-commit, rebalances blocked while a
// poll's records are dispatched, the partition callbacks), the producer's
// (the output partitioner, the brokers' batch bound) and the hooks.
func (p *Pipeline) groupClientOpts() ([]kgo.Opt, error) {
	cfg := p.cfg
	reset := kgo.NewOffset().AtStart()
	if cfg.Kafka.StartOffset == "latest" {
		reset = kgo.NewOffset().AtEnd()
	}
	base, err := kafkaconn.Opts(cfg.Kafka, p.member.brokers)
	if err != nil {
		return nil, err
	}
	opts := append(base,
		kgo.ConsumerGroup(p.member.group),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(cfg.Kafka.FetchMaxWait),
		kgo.FetchMaxPartitionBytes(cfg.Kafka.FetchMaxPartitionBytes),
		kgo.SessionTimeout(cfg.Kafka.SessionTimeout),
		kgo.RebalanceTimeout(cfg.Kafka.RebalanceTimeout),
		kgo.OnPartitionsAssigned(p.onAssigned),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.RecordPartitioner(newOutputPartitioner()),
		kgo.ProducerBatchMaxBytesFn(p.member.limits.BatchMax),
		kgo.WithLogger(kgoLogger{p.log}),
		kgo.WithHooks(readHook{&p.counters.stats.Read}, p.counters.health),
		// Records of aborted transactions upstream are never processed.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	if *cfg.Kafka.StaticMembership {
		p.member.instanceID = p.member.group + "." + cfg.Host.ID
		opts = append(opts, kgo.InstanceID(p.member.instanceID), kgo.WithHooks(fencedHook{p}))
	}
	return opts, nil
}

// newStateStores makes the pipeline's state stores (state.enabled) in dir,
// once its client exists: the stores read the input's partitions and the
// changelog's end offsets with it, and each restore reads the changelog
// with a client of its own made with the host's connection settings.
func (p *Pipeline) newStateStores(dir string) {
	c := state.Config{Pipeline: p.pc.Name, HostID: p.cfg.Host.ID, Dir: dir, Input: p.pc.Inputs[0],
		RestoreTimeout: p.pc.State.RestoreTimeout, Limits: stateLimits(p.pc)}
	dial := func(opts ...kgo.Opt) (*kgo.Client, error) {
		return kafkaconn.NewClient(p.cfg.Kafka, p.member.brokers, append(opts, kgo.WithLogger(kgoLogger{p.log}))...)
	}
	st := &p.counters.stats
	n := &state.Counters{Restored: &st.StateRestored, RestoreSkipped: &st.StateRestoreSkipped,
		RestoreNanos: &st.StateRestoreNanos, Refused: &st.StateRefused, FlushFailures: &st.StateFlushFailures,
		TimersSet: &st.TimersSet}
	p.subs.state = state.NewStores(c, p.member.cl, dial, n, p.log)
	p.subs.onCommitted = append(p.subs.onCommitted, func(_ int32, upTo int64, from *state.Partition) { p.subs.state.Flush(from, upTo) })
	// A gone partition's store leaves the open set at once, so that a new
	// assignment of it opens it anew (waiting for the file until it is
	// closed), and closes once the tasks' workers ended.
	p.subs.onGone = append(p.subs.onGone, p.subs.state.Detach)
}

// Name is the pipeline's name.
func (p *Pipeline) Name() string { return p.pc.Name }

// Start begins consuming. Call once.
func (p *Pipeline) Start() {
	p.eng = p.engineDeps()
	p.tasks.Start(p.eng)
	// Topics are added only now, so the group is joined (and the partition
	// callbacks can run) only once the pipeline is fully built.
	p.member.cl.AddConsumeTopics(p.pc.Inputs...)
	p.commit.Start()
	ctx, cancel := context.WithCancel(context.Background())
	p.life.pollCancel = cancel
	go p.src.Run(ctx) // owned through pollCancel and pollDone
}

// onAssigned, onRevoked and onLost are the client's partition callbacks,
// registered before the source is made (Pipeline.wire makes the client
// first): the source's membership handles them (source.Group.Assigned,
// Revoked, Lost). They run only once Start added the topics.
func (p *Pipeline) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	p.src.(*source.Group).Assigned(ctx, assigned)
}

func (p *Pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	p.src.(*source.Group).Revoked(ctx, revoked)
}

func (p *Pipeline) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	p.src.(*source.Group).Lost(lost)
}

// opening tells the subscribers to an assignment of newly assigned
// partitions (source.Deps.Opening): the state stores open and restore
// there, before the partitions' tasks exist, so no record of theirs runs
// on a store not yet restored. False: a store could not open (the
// pipeline failed) or the pipeline stopped.
func (p *Pipeline) opening(ctx context.Context, assigned map[string][]int32) bool {
	if p.subs.state == nil || p.life.stopped.Load() {
		return !p.life.stopped.Load()
	}
	for _, parts := range assigned {
		if err := p.subs.state.Open(ctx, parts); err != nil {
			p.fail(err)
			return false
		}
	}
	return true
}

// Stop shuts the pipeline down in stages, the same for every consume mode
// and guarantee: the source stops polling; every task drains (records in
// progress finish within shutdown.drain_timeout, their produces
// acknowledged); the committer commits what they finished (the watermarks,
// the last transaction; a share group's held records are given back); the
// tasks are detached and the source leaves the group (the revoke callback
// then finds none); the tasks are retired, the pipeline's loops and
// background work end, the state stores close, and the client closes last.
func (p *Pipeline) Stop(ctx context.Context) {
	if !p.life.stopped.CompareAndSwap(false, true) {
		return
	}
	if p.life.pollCancel != nil {
		p.life.pollCancel()
		<-p.life.pollDone
	}
	tasks := p.tasks.Attached()
	p.drain(tasks)
	p.commit.Final(ctx, tasks)
	p.tasks.DetachAll()
	p.src.Leave(ctx)
	for _, t := range tasks {
		t.Dead.Store(true) // nothing they finish now is released
	}
	partition.Retire(tasks)
	close(p.life.quit)
	p.life.wg.Wait()
	p.life.bg.Close()
	if p.subs.state != nil {
		p.subs.state.CloseAll()
	}
	p.commit.Close()
	p.eng.Schema.Close()
	p.leaveStatic(ctx)
}

// fencedHook fails the pipeline when another member joined its group with
// the same static instance id: two hosts with one host.id. Rejoining would
// only fence the other host in turn, each taking the partitions from the
// other every session.
type fencedHook struct{ p *Pipeline }

func (h fencedHook) OnGroupManageError(err error) {
	if errors.Is(err, kerr.FencedInstanceID) && h.p.life.onFail != nil {
		h.p.life.onFail(fmt.Errorf("pipeline %s: another member joined group %s as %s: each host needs its own host.id (or set kafka.static_membership: false): %w",
			h.p.pc.Name, h.p.member.group, h.p.member.instanceID, err))
	}
}

// leaveStatic takes the pipeline's static member out of its group once its
// client is closed. A static member's client does not leave by itself
// (KIP-345: a restart is meant to find its partitions waiting), so without
// this a clean stop would leave them idle for session_timeout.
func (p *Pipeline) leaveStatic(ctx context.Context) {
	if p.member.instanceID == "" {
		return
	}
	cl, err := kafkaconn.NewClient(p.cfg.Kafka, p.member.brokers)
	if err != nil {
		p.log.Warn("leaving the group", "group", p.member.group, "err", err)
		return
	}
	defer cl.Close()
	// The drain may have used up ctx: the leave gets a few seconds of its own.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).LeaveGroup(lctx, kadm.LeaveGroup(p.member.group).InstanceIDs(p.member.instanceID).Reason("wasmstream host stopping"))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		p.log.Warn("leaving the group: its partitions wait for kafka.session_timeout", "group", p.member.group, "instance_id", p.member.instanceID, "err", err)
		return
	}
	p.log.Info("left the group", "group", p.member.group, "instance_id", p.member.instanceID)
}

// drain stops tasks, waits up to the drain deadline for their records in
// progress to finish and for the produces those records need to be
// acknowledged, then aborts whatever is still running.
func (p *Pipeline) drain(tasks []*partition.Task) {
	deadline := time.Now().Add(p.cfg.Shutdown.DrainTimeout)
	for _, t := range tasks {
		t.Stop()
	}
	for _, t := range tasks {
		if !t.WaitWorkers(deadline) {
			p.log.Warn("drain deadline reached; interrupting the records in progress", "topic", t.Topic, "partition", t.Partition)
			t.Abort()
			t.WaitWorkers(time.Now().Add(time.Minute))
		}
	}
	for _, t := range tasks {
		for t.StartedPending() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := t.StartedPending(); n > 0 {
			p.log.Warn("drain deadline reached with produces unacknowledged; those records stay uncommitted", "topic", t.Topic, "partition", t.Partition, "records", n)
		}
	}
}

// Snapshot returns the pipeline's counters (counterTable: counters.go)
// and gauges.
func (p *Pipeline) Snapshot() Snapshot {
	s := Snapshot{Name: p.pc.Name}
	p.countersInto(&s)
	if p.shared.asyncSize != nil {
		var reason, detail string
		s.AsyncLimit, reason, detail = p.shared.asyncSize.State()
		s.AsyncReason = reason + ": " + detail
	}
	var lastChange time.Time
	gs := p.taskGauges(false)
	s.Stalled, s.BrokerErrors = p.stalls(gs), p.counters.health.snapshot()
	for _, g := range gs {
		s.Tasks++
		s.Lag += g.Lag
		if g.Sized {
			s.TargetInstances += g.Target
			if s.PoolReason == "" || g.ChangedAt.After(lastChange) {
				lastChange = g.ChangedAt
				s.PoolReason = fmt.Sprintf("%s[%d] %s: %s", g.Topic, g.Partition, g.Reason, g.Detail)
			}
		}
		s.Instances += g.Workers
		s.Busy += g.Busy
		s.InFlight += int64(g.InFlight)
		s.Queued += int64(g.Queued)
		if g.Paused {
			s.Paused++
		}
	}
	return s
}

// taskGauges returns every task's gauges (Set.mu only to list the tasks;
// each task's own lock briefly).
func (p *Pipeline) taskGauges(withSlots bool) []partition.TaskGauges {
	tasks := p.tasks.Attached()
	out := make([]partition.TaskGauges, len(tasks))
	for i, t := range tasks {
		out[i] = t.Gauges(withSlots)
	}
	return out
}

// partitionStats returns the counters of a partition.
func (c *pipeCounters) partitionStats(topic string, partition int32) *Stats {
	c.psMu.Lock()
	defer c.psMu.Unlock()
	if c.parts == nil {
		c.parts = map[tp]*Stats{}
	}
	s := c.parts[tp{Topic: topic, Partition: partition}]
	if s == nil {
		s = &Stats{}
		c.parts[tp{Topic: topic, Partition: partition}] = s
	}
	return s
}

// Client is the pipeline's Kafka client (tests and tools).
func (p *Pipeline) Client() *kgo.Client { return p.member.cl }

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

// fail reports an error the pipeline cannot recover from; the host stops.
// (A member that cannot go on while a new one can is not that: broke,
// rebuild.go.)
func (p *Pipeline) fail(err error) {
	if !p.life.failed.CompareAndSwap(false, true) {
		return
	}
	p.log.Error("pipeline failed", "err", err)
	if p.life.onFail != nil {
		p.life.onFail(err)
	}
}
