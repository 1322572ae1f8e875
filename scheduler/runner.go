package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/memtrim"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/tracing"
)

// Runner is a host: every configured pipeline, their modules, and the
// embedded broker when the config asks for one.
type Runner struct {
	cfg     *config.Config
	log     *slog.Logger
	engine  *host.Engine
	broker  *kfake.Cluster
	brokers []string
	modules []*host.Module
	// pipelines are the pipelines in config order, each primary followed
	// by its retry tier. Once the runner started, pipesMu guards them: a
	// rebuild (rebuild.go) replaces one with a new slice, so a slice pipes
	// returned is never written to; Stop sets stopping, after which none
	// is replaced.
	pipesMu    sync.RWMutex
	pipelines  []*Pipeline
	stopping   bool
	rebuilds   rebuilds  // the rebuilds in progress, and how often each pipeline was rebuilt
	clientOpts []kgo.Opt // Options.clientOpts, for the pipelines rebuilt
	budget     *Budget
	trimmer    *memtrim.Trimmer      // returns retired instances' memory to the OS (budget.OnRetire)
	hooks      hooks.Hooks           // what observes the record path; pipelines get a copy
	limits     partition.TopicLimits // what the brokers refuse on the topics produced to (ensureTopics)
	loadTimes  []loadTime
	retired    retiredVersions // versions no longer running, kept a while for their metrics (versions.go)
	started    atomic.Bool
	stopOnce   sync.Once
	failed     chan error // a pipeline's unrecoverable error (buffered, first one)

	// registryPrefix is Options.RegistryPrefix: the fleet registry's
	// topics the access check asks about.
	registryPrefix string

	// schemaReg is the process's one schema-registry client, shared by
	// its pipelines (schema_registry.url; nil without one).
	schemaReg *schemareg.Client
}

// NewEngine creates the host's engine with its compile cache
// (host.compile_cache_dir). The default directory (auto) is a convenience:
// if it cannot be used the host compiles in memory and says why; a
// directory set explicitly must be usable.
func NewEngine(cfg *config.Config, log *slog.Logger) (*host.Engine, error) {
	dir, auto, err := cfg.CompileCacheDir()
	if err == nil {
		var e *host.Engine
		if e, err = host.NewEngine(dir, log); err == nil {
			return e, nil
		}
		err = fmt.Errorf("host.compile_cache_dir: %w", err)
	}
	if !auto {
		return nil, err
	}
	log.Warn("compiled modules are kept in memory only", "err", err)
	return host.NewEngine("", log)
}

// NewRunner loads every module, starts the embedded broker if configured,
// checks (or creates) the topics and creates the pipelines. Errors name the
// config key they concern.
func NewRunner(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Runner, error) {
	return NewRunnerWith(ctx, cfg, log, Options{})
}

// Options are what a host may decide about a runner before it starts.
type Options struct {
	// Modules are the modules to run instead of the config's, by pipeline
	// name (the version deployed through the admin API or the fleet's
	// registry): the config's module is then not read or compiled.
	Modules map[string][]byte
	// CheckConfigModules compiles the config's module of a pipeline that
	// Modules overrides too, and fails if it does not load (it is then
	// closed): `run --compile-config-module`.
	CheckConfigModules bool
	// RegistryPrefix names the fleet registry's topics as the registry
	// opened them (registry.Registry.Prefix: the previous default's where
	// they hold the fleet's registry), for the access check; "": the
	// config's (admin.registry_topic_prefix).
	RegistryPrefix string

	// clientOpts are added to every pipeline's Kafka client (tests: a
	// dialer that drops connections).
	clientOpts []kgo.Opt
}

// NewRunnerWith is NewRunner with opts.
func NewRunnerWith(ctx context.Context, cfg *config.Config, log *slog.Logger, opts Options) (_ *Runner, err error) {
	r := &Runner{cfg: cfg, log: log, failed: make(chan error, 1), clientOpts: opts.clientOpts, registryPrefix: opts.RegistryPrefix}
	defer func() {
		if err != nil {
			r.close(context.Background())
		}
	}()
	if r.engine, err = NewEngine(cfg, log); err == nil {
		r.schemaReg, err = newSchemaClient(ctx, cfg, log) // reads its files, asks the registry one question
	}
	if err != nil {
		return nil, err
	}
	r.engine.LimitHeldOutputs(cfg.Host.MaxHeldOutputBytes)
	r.engine.SetClockResolution(cfg.Host.ClockResolution)
	r.engine.SetAsyncEnv(asyncop.Env{Schemas: r.schemaReg})
	tc := cfg.Tracing
	r.hooks.Tracer, err = tracing.New(ctx, tracing.Config{Exporter: tc.Exporter, Endpoint: tc.Endpoint, Insecure: tc.Insecure,
		File: cfg.TracingFile(), SampleRatio: *tc.SampleRatio, MaxFileBytes: tc.MaxFileBytes, MaxFiles: tc.MaxFiles,
		ServiceName: tc.ServiceName, Version: Version})
	if err != nil {
		return nil, err
	}
	if tc.Exporter == tracing.ExporterJSONL {
		// What the file will hold and how large it grows, said once.
		size := fmt.Sprintf("%d bytes", tc.MaxFileBytes)
		if tc.MaxFileBytes%(1<<20) == 0 {
			size = fmt.Sprintf("%d MiB", tc.MaxFileBytes>>20)
		}
		log.Info(fmt.Sprintf("tracing to %s: every failed record, and %g%% of the healthy ones (tracing.sample_ratio); rotated at %s, %d older parts kept (tracing.max_file_bytes, tracing.max_files)",
			cfg.TracingFile(), *tc.SampleRatio*100, size, tc.MaxFiles))
	}
	if err := r.loadModules(ctx, opts); err != nil {
		return nil, err
	}
	r.brokers = cfg.Kafka.Brokers
	logWarnings(log, kafkaconn.Warnings(cfg.Kafka))
	if cfg.IsEmbedded() {
		r.broker, err = kfake.NewCluster(kfake.Ports(cfg.Kafka.EmbeddedPort), kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("kafka.brokers: start embedded broker: %w", err)
		}
		r.brokers = r.broker.ListenAddrs()
		log.Info("embedded Kafka broker listening", "addr", strings.Join(r.brokers, ","))
	}
	if err := r.ensureTopics(ctx); err != nil {
		return nil, err
	}
	r.budget = NewBudget(cfg.Host.MaxInstances, cfg.Host.MaxInstanceMemory, cfg.Host.MaxInFlight)
	r.budget.LimitAsync(cfg.Host.MaxAsyncInFlight, r.engine.AsyncInFlight)
	r.budget.LimitHeldOutputs(r.engine)
	r.trimmer = memtrim.Start()
	r.budget.OnRetire(r.trimmer.Closed)
	if err := r.newPipelines(opts); err != nil {
		return nil, err
	}
	return r, nil
}

// loadModules loads each pipeline's module into r.modules, in the
// config's order: the one deployed (opts.Modules) or the config's. Every
// module that does not load is one of the problems returned.
func (r *Runner) loadModules(ctx context.Context, opts Options) error {
	cfg, log := r.cfg, r.log
	var obs host.Observer
	if r.hooks.Tracer != nil {
		obs = partition.JobObserver{}
	}
	var probs config.Problems
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		start := time.Now()
		var m *host.Module
		var err error
		if wasm, ok := opts.Modules[pc.Name]; ok {
			if opts.CheckConfigModules {
				cm, cerr := loadModule(ctx, r.engine, cfg, pc, log, obs)
				if cerr != nil {
					probs = append(probs, fmt.Sprintf("pipelines[%d].module (checked though the deployed version runs): %v", i, cerr))
					continue
				}
				cm.Close(ctx)
			}
			m, err = loadModuleBytes(ctx, r.engine, pc, wasm, "deployed", log, obs)
			if err != nil {
				err = fmt.Errorf("the deployed version (which replaces it) does not load: %w", err)
			}
		} else {
			m, err = loadModule(ctx, r.engine, cfg, pc, log, obs)
		}
		r.loadTimes = append(r.loadTimes, loadTime{pc.Name, time.Since(start), m != nil && m.FromCache()})
		if err != nil {
			probs = append(probs, fmt.Sprintf("pipelines[%d].module: %v", i, err))
			continue
		}
		r.modules = append(r.modules, m)
	}
	if len(probs) > 0 {
		return probs
	}
	return nil
}

// newPipelines makes each configured pipeline, its retry tier after it
// (retry.mode: topics), from the modules loaded.
func (r *Runner) newPipelines(opts Options) error {
	for i := range r.cfg.Pipelines {
		pc := &r.cfg.Pipelines[i]
		d := r.pipelineDeps(partition.Primary{Auto: pc.Instances.Auto})
		d.version = &modVersion{M: r.modules[i]}
		p, err := newPipeline(pc, d, opts.clientOpts...)
		if err != nil {
			return err
		}
		r.pipelines = append(r.pipelines, p)
		if topics := pc.RetryTopics(); len(topics) > 0 {
			d.role = partition.RetryTier{} // d.version: one version shared, retiring it waits for both
			rp, err := newPipeline(retryConfig(r.cfg, pc, topics), d, opts.clientOpts...)
			if err != nil {
				return err
			}
			r.pipelines = append(r.pipelines, rp)
		}
	}
	return nil
}

// pipelineDeps are what the runner builds a pipeline of role from,
// besides its config and module version.
func (r *Runner) pipelineDeps(role partition.Role) pipelineDeps {
	return pipelineDeps{cfg: r.cfg, budget: r.budget, brokers: r.brokers, log: r.log, hooks: r.hooks, limits: r.limits,
		onFail: r.fail, onBroken: r.broken, role: role, schemaReg: r.schemaReg}
}

// fail delivers err on Failed, unless an error was delivered before.
func (r *Runner) fail(err error) {
	select {
	case r.failed <- kafkaconn.Explain(r.cfg.Kafka, err):
	default:
	}
}

// pipes are the running pipelines, in config order, each primary followed
// by its retry tier. The slice is never written to (a rebuild replaces it).
func (r *Runner) pipes() []*Pipeline {
	r.pipesMu.RLock()
	defer r.pipesMu.RUnlock()
	return r.pipelines
}

// Failed delivers the first error a pipeline cannot recover from (a
// missing topic, an exactly_once pipeline whose transactional producer
// kept failing after it was rebuilt: rebuild.go); the host should then
// stop.
func (r *Runner) Failed() <-chan error { return r.failed }

// retryConfig is the retry tier of pc: the same module, output and
// retry policy, consuming pc's retry topics in its own group, records in
// order of their due time on a pool that starts empty, grows while records
// are due and shrinks when the backlog is gone (RATIONALE.md, "Retries").
func retryConfig(cfg *config.Config, pc *config.Pipeline, topics []string) *config.Pipeline {
	s := *pc
	s.Name = pc.Name + retryTierSuffix
	s.Group = cfg.RetryGroupID(pc)
	s.Inputs = topics
	s.Ordering = config.OrderNone
	s.Consume = config.ConsumeGroup // retries wait until due: a consumer group holds no locks meanwhile
	s.Instances = pc.Retry.Instances
	if s.Transactions.ID != "" {
		s.Transactions.ID += ".retry"
	}
	return &s
}

// retryTierSuffix ends the name of a primary's retry tier.
const retryTierSuffix = ".retry"

// LoadModule reads and loads a pipeline's module with its limits.
func LoadModule(ctx context.Context, e *host.Engine, cfg *config.Config, pc *config.Pipeline, log *slog.Logger) (*host.Module, error) {
	return loadModule(ctx, e, cfg, pc, log, nil)
}

func loadModule(ctx context.Context, e *host.Engine, cfg *config.Config, pc *config.Pipeline, log *slog.Logger, obs host.Observer) (*host.Module, error) {
	path := cfg.ModulePath(pc)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return loadModuleBytes(ctx, e, pc, b, path, log, obs)
}

// ModuleConfig is how the pipeline pc runs its module: its limits, the
// topics it may emit to, its asynchronous operations and environment, with
// obs (nil: none) seeing its calls. `wasmstream test` runs a module the
// same way.
func ModuleConfig(pc *config.Pipeline, obs host.Observer) host.ModuleConfig {
	allowed := append([]string{pc.Output}, pc.AllowedOutputs...)
	return host.ModuleConfig{
		Name: pc.Name,
		Limits: host.Limits{
			MemoryPages:       pc.Limits.MemoryPages,
			TableElements:     pc.Limits.TableElements,
			RecordTimeout:     pc.Limits.RecordTimeout,
			MaxOutputs:        pc.Limits.MaxOutputs,
			MaxOutputBytes:    pc.Limits.MaxOutputBytes,
			LogBytesPerSecond: pc.Limits.LogBytesPerSecond,
			LogBurstBytes:     pc.Limits.LogBurstBytes,
		},
		AllowedTopics: allowed,
		Async:         host.AsyncConfig{Config: pc.Async, Key: "pipelines." + pc.Name + ".async"},
		Env:           pc.Env,
		Observer:      obs,
		Weight:        pc.Weight,
		// A Redpanda transform is told of one input topic
		// (REDPANDA_INPUT_TOPIC): the pipeline's first.
		Redpanda: host.RedpandaConfig{InputTopic: firstInput(pc), Strict: pc.Redpanda.Strict,
			PartitionSameAsInput: pc.Redpanda.OutputPartitioning == config.RedpandaPartitionSameAsInput},
	}
}

// firstInput is the pipeline's first input topic, "" when it has none.
func firstInput(pc *config.Pipeline) string {
	if len(pc.Inputs) == 0 {
		return ""
	}
	return pc.Inputs[0]
}

// loadModuleBytes validates and compiles wasm for the pipeline pc.
func loadModuleBytes(ctx context.Context, e *host.Engine, pc *config.Pipeline, b []byte, path string, log *slog.Logger, obs host.Observer) (*host.Module, error) {
	start := time.Now()
	m, err := e.Load(ctx, b, ModuleConfig(pc, obs))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkTimers(pc, m.Info()); err != nil {
		m.Close(ctx)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	log.Info("module loaded", "pipeline", pc.Name, "path", path, "digest", m.Info().Digest[:12], "from_compile_cache", m.FromCache(), "took", time.Since(start).Round(time.Millisecond))
	return m, nil
}

// Brokers are the broker addresses the pipelines use (the embedded broker's
// listener when embedded).
func (r *Runner) Brokers() []string { return r.brokers }

// Pipelines are the runner's pipelines, in config order, each primary
// followed by its retry tier. A pipeline rebuilt after its member failed
// (rebuild.go) is a new *Pipeline: ask again rather than keep one.
func (r *Runner) Pipelines() []*Pipeline { return r.pipes() }

// ensureTopics checks that every topic the pipelines use exists; with
// kafka.create_topics (always with the embedded broker) it creates the
// missing ones. Retry-tier topics are wasmstream's own (like Kafka Streams'
// repartition topics): a missing one is always created, with as many
// partitions as the most of its pipeline's inputs. Before anything is
// created, checkOldRetryTopics makes sure no retries wait in the topics of
// the previous default retry.topic_prefix. It returns once the brokers'
// metadata lists every topic it created (awaitTopics).
func (r *Runner) ensureTopics(ctx context.Context) error {
	cl, err := r.adminClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	plan := r.planTopics()
	topics := plan.sorted()
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	details, err := r.describeTopics(mctx, cl, adm, topics)
	if err != nil {
		return err
	}
	if err := r.checkOldRetryTopics(mctx, cl); err != nil {
		return err
	}
	missing, missingRetry, err := plan.missing(topics, details)
	if err != nil {
		return err
	}
	if len(missing) > 0 && !r.cfg.Kafka.CreateTopics && r.broker == nil {
		return plan.absent(missing)
	}
	if len(missing) > 0 {
		if err := r.createTopics(mctx, adm, plan.keys, r.cfg.Kafka.TopicPartitions, missing...); err != nil {
			return err
		}
	}
	if err := r.ensureChangelogs(mctx, adm, plan.changelogs, plan.keys); err != nil {
		return err
	}
	for _, t := range missingRetry {
		if err := r.createTopics(mctx, adm, plan.keys, plan.retryPartitions(t, details, r.cfg.Kafka.TopicPartitions), t); err != nil {
			return err
		}
	}
	created := append(append([]string(nil), missing...), missingRetry...)
	for t := range plan.changelogs { // an existing one is listed at once
		created = append(created, t)
	}
	if err := awaitTopics(mctx, adm, created...); err != nil {
		return fmt.Errorf("kafka: waiting for the topics this host created: %w", err)
	}
	r.limits = partition.ReadTopicLimits(mctx, adm, topics, r.log)
	return nil
}

// topicPlan is every topic the pipelines use, as ensureTopics sorts them.
type topicPlan struct {
	keys       map[string]string   // topic -> first config key naming it
	retry      map[string][]string // retry-tier topic -> its pipelines' inputs
	changelogs map[string]int      // state changelog topic -> its pipeline's index
}

// planTopics lists the topics of the configured pipelines: inputs, outputs,
// dead-letter and allowed output topics, retry tiers, state changelogs.
func (r *Runner) planTopics() topicPlan {
	plan := topicPlan{keys: map[string]string{}, retry: map[string][]string{}, changelogs: map[string]int{}}
	first := func(t, key string) {
		if _, ok := plan.keys[t]; !ok {
			plan.keys[t] = key
		}
	}
	for i, pc := range r.cfg.Pipelines {
		for j, t := range pc.Inputs {
			first(t, fmt.Sprintf("pipelines[%d].inputs[%d]", i, j))
		}
		first(pc.Output, fmt.Sprintf("pipelines[%d].output", i))
		first(pc.DeadLetterTopic, fmt.Sprintf("pipelines[%d].dead_letter_topic", i))
		for j, t := range pc.AllowedOutputs {
			first(t, fmt.Sprintf("pipelines[%d].allowed_outputs[%d]", i, j))
		}
		for _, t := range pc.RetryTopics() {
			first(t, fmt.Sprintf("pipelines[%d].retry (topic_prefix, backoff)", i))
			plan.retry[t] = append(plan.retry[t], pc.Inputs...)
		}
	}
	for i, pc := range r.cfg.Pipelines {
		if pc.State.Enabled {
			plan.keys[pc.State.Changelog] = fmt.Sprintf("pipelines[%d].state.changelog", i)
			plan.changelogs[pc.State.Changelog] = i
		}
	}
	return plan
}

// sorted is the plan's topics in order.
func (plan topicPlan) sorted() []string {
	topics := make([]string, 0, len(plan.keys))
	for t := range plan.keys {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	return topics
}

// describeTopics checks that the brokers grant this host what it needs and
// lists the topics; a denial or an unreachable cluster is the error.
func (r *Runner) describeTopics(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topics []string) (kadm.TopicDetails, error) {
	denied, err := checkAccess(ctx, cl, r.cfg, r.registryPrefix)
	if len(denied) > 0 {
		return nil, fmt.Errorf("kafka: the brokers deny this host's principal %s: grant them (README.md, \"ACLs the host needs\")", strings.Join(denied, "; "))
	}
	var details kadm.TopicDetails
	if err == nil {
		details, err = adm.ListTopics(ctx, topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka.brokers: cannot reach %s: %w", strings.Join(r.brokers, ","), kafkaconn.Explain(r.cfg.Kafka, err))
	}
	return details, nil
}

// missing sorts the topics the brokers do not have: retry tiers apart from
// the rest; changelogs in neither (ensureChangelogs creates them once the
// inputs exist). A topic the brokers describe with an error other than
// UNKNOWN_TOPIC_OR_PARTITION is the error.
func (plan topicPlan) missing(topics []string, details kadm.TopicDetails) (missing, missingRetry []string, err error) {
	for _, t := range topics {
		if d, ok := details[t]; ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			if d.Err != nil {
				return nil, nil, fmt.Errorf("%s: topic %s: %w", plan.keys[t], t, d.Err)
			}
		} else if _, ok := plan.retry[t]; ok {
			missingRetry = append(missingRetry, t)
		} else if _, ok := plan.changelogs[t]; !ok {
			missing = append(missing, t)
		}
	}
	return missing, missingRetry, nil
}

// absent is the problem of each missing topic when this host may not
// create them.
func (plan topicPlan) absent(missing []string) config.Problems {
	var probs config.Problems
	for _, t := range missing {
		probs = append(probs, fmt.Sprintf("%s: topic %q does not exist (create it, or set kafka.create_topics: true)", plan.keys[t], t))
	}
	return probs
}

// retryPartitions is how many partitions retry-tier topic t gets: the
// most of its pipelines' inputs (an input missing from details was
// created just now, with defaultParts), at least 1.
func (plan topicPlan) retryPartitions(t string, details kadm.TopicDetails, defaultParts int32) int32 {
	parts := int32(1)
	for _, in := range plan.retry[t] {
		n := defaultParts
		if d, ok := details[in]; ok && d.Err == nil {
			n = int32(len(d.Partitions))
		}
		parts = max(parts, n)
	}
	return parts
}

// createTopics creates ts with partitions each (the brokers' default
// replication); a topic created meanwhile by another host is no error.
func (r *Runner) createTopics(ctx context.Context, adm *kadm.Client, keys map[string]string, partitions int32, ts ...string) error {
	resp, err := adm.CreateTopics(ctx, partitions, -1, nil, ts...)
	if err != nil {
		return fmt.Errorf("%s: create topic %q: %w", keys[ts[0]], ts[0], err)
	}
	for _, t := range ts {
		if res, ok := resp[t]; ok && res.Err != nil && !errors.Is(res.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("%s: create topic %q: %w", keys[t], t, res.Err)
		}
		r.log.Info("created topic", "topic", t, "partitions", partitions)
	}
	return nil
}

// adminClient is a client for one-off requests to the brokers (topics,
// metadata); the caller closes it.
func (r *Runner) adminClient() (*kgo.Client, error) {
	cl, err := kafkaconn.NewClient(r.cfg.Kafka, r.brokers)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// Start starts every pipeline.
func (r *Runner) Start() {
	r.started.Store(true)
	for _, p := range r.pipes() {
		p.Start()
	}
}

// Stop stops every pipeline (each drains and commits within
// shutdown.drain_timeout), then closes modules and the embedded broker. A
// rebuild in progress ends without starting its new pipeline, and is
// waited for.
func (r *Runner) Stop(ctx context.Context) {
	r.stopOnce.Do(func() {
		r.pipesMu.Lock()
		r.stopping = true
		pipes := r.pipelines
		r.pipesMu.Unlock()
		var wg sync.WaitGroup
		for _, p := range pipes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Stop(ctx)
			}()
		}
		wg.Wait()
		r.rebuilds.bg.Close()
		for _, p := range pipes {
			if c := p.mods.Canary.Load(); c != nil && c.Check != nil {
				c.Check.Stop()
			}
		}
		r.close(ctx)
	})
}

func (r *Runner) close(ctx context.Context) {
	if !r.started.Load() {
		for _, p := range r.pipes() {
			p.member.cl.Close() // never joined: nothing to drain
			p.eng.Schema.Close()
		}
	}
	for _, m := range r.modules {
		m.Close(ctx)
	}
	for _, p := range r.pipes() {
		if v := p.mods.Ver.Load(); v != nil {
			v.Close()
		}
	}
	if r.trimmer != nil {
		r.trimmer.Stop()
	}
	if r.engine != nil {
		r.engine.Close(ctx)
	}
	if r.hooks.Tracer != nil {
		if err := r.hooks.Tracer.Shutdown(ctx); err != nil {
			r.log.Warn("tracing: exporting the last spans failed", "err", err)
		}
	}
	if r.broker != nil {
		r.broker.Close()
	}
}

// pipelineByName returns the primary pipeline named name and its retry
// pipeline (nil when it has none). Either may be replaced by a rebuild
// meanwhile: what is set on their modules reaches the new one too (it
// shares them).
func (r *Runner) pipelineByName(name string) (*Pipeline, *Pipeline) {
	return pairOf(r.pipes(), name)
}

// pairOf returns the primary pipeline of pipes named name and its retry
// tier (nil when it has none).
func pairOf(pipes []*Pipeline, name string) (p, rp *Pipeline) {
	for _, q := range pipes {
		switch {
		case !q.role.IsRetry() && q.pc.Name == name:
			p = q
		case q.role.IsRetry() && q.pc.Name == name+retryTierSuffix:
			rp = q
		}
	}
	if p == nil {
		return nil, nil
	}
	return p, rp
}

// primaryName is the name of the primary pipeline of the retry tier p.
func primaryName(p *Pipeline) string { return strings.TrimSuffix(p.pc.Name, retryTierSuffix) }

// PipelineNames are the configured pipelines' names.
func (r *Runner) PipelineNames() []string {
	var out []string
	for _, p := range r.pipes() {
		if !p.role.IsRetry() {
			out = append(out, p.pc.Name)
		}
	}
	return out
}

// Ready reports nil when every module is loaded, every pipeline joined its
// consumer group, no state is being restored and the brokers answer;
// otherwise why not.
func (r *Runner) Ready(ctx context.Context) error {
	if !r.started.Load() {
		return errors.New("not started")
	}
	pipes := r.pipes()
	for _, p := range pipes {
		if p.life.stopped.Load() {
			return fmt.Errorf("pipeline %s is stopping", p.pc.Name)
		}
		if _, gen := p.member.cl.GroupMetadata(); gen < 0 {
			return fmt.Errorf("pipeline %s has not joined group %s yet", p.pc.Name, p.member.group)
		}
		if p.subs.state != nil {
			if n := p.subs.state.Restoring(); n > 0 {
				return fmt.Errorf("pipeline %s is restoring the state of %d partition(s) from %s", p.pc.Name, n, p.pc.State.Changelog)
			}
		}
	}
	if len(pipes) > 0 {
		if err := pipes[0].member.cl.Ping(ctx); err != nil {
			return fmt.Errorf("brokers unreachable: %w", err)
		}
	}
	return nil
}

// ErrNoPipeline is returned for a pipeline name the config does not have.
var ErrNoPipeline = errors.New("no such pipeline")

// Check validates and compiles wasm as the pipeline's module would be,
// without deploying it.
func (r *Runner) Check(ctx context.Context, pipeline string, wasm []byte) (host.Info, error) {
	p, _ := r.pipelineByName(pipeline)
	if p == nil {
		return host.Info{}, fmt.Errorf("%w %q", ErrNoPipeline, pipeline)
	}
	m, err := loadModuleBytes(ctx, r.engine, p.pc, wasm, "upload", r.log, nil)
	if err != nil {
		return host.Info{}, err
	}
	defer m.Close(ctx)
	return m.Info(), nil
}

// Deploy makes wasm the pipeline's module (and its retry workers'), without
// stopping: records not yet started run on the new version, records in
// progress finish on the old one. A module that does not validate is
// refused and the running version keeps running untouched.
func (r *Runner) Deploy(ctx context.Context, pipeline string, wasm []byte) (host.Info, error) {
	p, rp := r.pipelineByName(pipeline)
	if p == nil {
		return host.Info{}, fmt.Errorf("%w %q", ErrNoPipeline, pipeline)
	}
	var obs host.Observer
	if r.hooks.Tracer != nil {
		obs = partition.JobObserver{}
	}
	m, err := loadModuleBytes(ctx, r.engine, p.pc, wasm, "deploy", r.log, obs)
	if err != nil {
		return host.Info{}, err
	}
	// One version for the pipeline and its retry workers: it closes when the
	// last instance of either is gone.
	v := &modVersion{M: m}
	if old := p.mods.Current(); old != nil && old.M.Info().Digest != m.Info().Digest {
		r.retired.add(pipeline, old, false, time.Now())
	}
	if rp != nil {
		v.Acquire() // held until both pipelines point to v
		rp.setModule(v)
	}
	p.setModule(v)
	if rp != nil {
		v.Release()
	}
	return m.Info(), nil
}

// Version is wasmstream's version, set by the CLI at start.
var Version = "dev"

// Budget is the host-wide instance and in-flight budget.
func (r *Runner) Budget() *Budget { return r.budget }

// Snapshots returns every pipeline's snapshot.
func (r *Runner) Snapshots() []Snapshot {
	pipes := r.pipes()
	out := make([]Snapshot, len(pipes))
	for i, p := range pipes {
		out[i] = p.Snapshot()
	}
	return out
}
