package config

import (
	"os"
	"reflect"
	"time"

	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/host/limits"
)

// Every default is stated once, here: Defaults and PipelineDefaults are the
// value each key takes when the file, the environment and flags leave it
// unset (zero), and applyDefaults fills them in. A few defaults depend on
// other keys; applyDefaults states those at the end, as code. The limits.*
// defaults are the engine's own (host.DefaultLimits), taken from the
// numbers both read (package host/limits, which links no WebAssembly
// runtime); the async.* defaults are stated beside each operation, in
// package host/asyncop, whose section the host takes whole. config.yaml at the repository root
// repeats every default in its comments; TestReferenceConfigStatesDefaults
// fails when the two differ. cmd/wasmstream's flags refer to these too.
// host.clock_resolution is the engine's own default too
// (limits.DefaultClockResolution).

// DefaultFile is the config file the commands read unless told otherwise.
const DefaultFile = "config.yaml"

// DefaultGrowAfter is instances.grow_after unless set. It is small next to
// a person's sense of latency and large next to one fetch batch of fast
// records, so that a batch arriving while an instance is busy does not grow
// the pool; instances are never created per record.
const DefaultGrowAfter = 20 * time.Millisecond

// DefaultBatchRecords is batch_records: the records one call into an
// instance runs at most. 64 takes most of the per-call cost off each
// record (BENCHMARKS.md, "Calls that carry several records") while a run
// stays short next to a fetch of one partition.
const DefaultBatchRecords = 64

// DefaultFetchMaxPartitionBytes is kafka.fetch_max_partition_bytes unless
// set: 512 KiB, half of the Java consumer's max.partition.fetch.bytes.
// A fetch brings its records at once, and they wait, decoded, in the heap;
// but a broker serves a client one fetch at a time, and at 256 KiB the
// workers finished a fetch before the next arrived. 512 KiB keeps them fed
// at less memory than 1 MiB (RATIONALE.md, "Fetching half a mebibyte a
// partition").
const DefaultFetchMaxPartitionBytes = 512 << 10

// Defaults that depend on other keys (applyDefaults).
const (
	// DefaultTracingFile is tracing.file with exporter: jsonl.
	DefaultTracingFile = "wasmstream-traces.jsonl"
	// DefaultFileSampleRatio is tracing.sample_ratio with exporter: jsonl:
	// failed records are traced in full whatever the ratio, healthy ones
	// one in a hundred, so that a file holds the records worth reading
	// (at 1.0 it grew 12 MB in 7,824 records).
	DefaultFileSampleRatio = 0.01
	// DefaultTracingMaxFileBytes and DefaultTracingMaxFiles bound the
	// jsonl file: rotated at 64 MiB, three rotated parts kept.
	DefaultTracingMaxFileBytes = 64 << 20
	DefaultTracingMaxFiles     = 3
	// MinTracingMaxFileBytes bounds tracing.max_file_bytes from below.
	MinTracingMaxFileBytes = 64 << 10
	// MaxTracingFiles bounds tracing.max_files (tracing.MaxRotatedFiles:
	// `wasmstream trace` reads that many parts).
	MaxTracingFiles = 100
	// DefaultHostID is host.id when the machine's hostname is unknown.
	DefaultHostID = "wasmstream"
	// DefaultCompileCacheDir is host.compile_cache_dir: auto, under the
	// user's cache directory (os.UserCacheDir: $XDG_CACHE_HOME or
	// ~/.cache on Linux). Hosts of one user on one machine share it.
	DefaultCompileCacheDir = "wasmstream/compiled"
	// CompileCacheNone is host.compile_cache_dir with compiled modules kept
	// in memory only.
	CompileCacheNone = "none"
	// DefaultRetryInstancesMax is retry.instances.max unless set (or
	// retry.instances.min, if higher).
	DefaultRetryInstancesMax = 2
	// DefaultStateDir is pipelines[].state.dir: auto, under the user's
	// cache directory; each store is a file in it named by host.id,
	// pipeline and partition.
	DefaultStateDir = "wasmstream/state"
	// DefaultChangelogSuffix follows the pipeline's consumer group in
	// state.changelog unless set: like the group, the changelog belongs to
	// one application and one pipeline (Kafka Streams names it
	// "<application.id>-<store>-changelog").
	DefaultChangelogSuffix = ".changelog"
	// DefaultRetryTopicSuffix follows the pipeline's consumer group in
	// retry.topic_prefix unless set, as in the retry workers' own group
	// ("<group>.retry"): like the changelog, retry topics belong to one
	// application and one pipeline, and two applications on one cluster
	// with pipelines of the same name must not read each other's failed
	// records (RATIONALE.md, "Retry topics named after the group").
	DefaultRetryTopicSuffix = ".retry"
	// OldDefaultRetryTopicSuffix followed the pipeline's name in
	// retry.topic_prefix unless set, before the default named the group
	// (Pipeline.OldDefaultRetryTopicPrefix). The host checks that no
	// records wait in topics of the old names before it leaves them.
	OldDefaultRetryTopicSuffix = ".retry"
	// DefaultRegistryTopicSuffix follows kafka.group in
	// admin.registry_topic_prefix unless set: <group>.registry.modules,
	// .deploys, .hosts.
	DefaultRegistryTopicSuffix = ".registry"
	// OldDefaultRegistryTopicPrefix preceded kafka.group in
	// admin.registry_topic_prefix before the default began with the group
	// (Config.OldDefaultRegistryPrefix).
	OldDefaultRegistryTopicPrefix = "wasmstream."
)

// Defaults returns the defaults of every key outside pipelines (a new
// value each call: it holds pointers). Keys it leaves zero have no default,
// or one applyDefaults derives: host.id (the hostname) and tracing.file
// (DefaultTracingFile with exporter: jsonl).
func Defaults() Config {
	return Config{
		Kafka: Kafka{
			ClientID:               "wasmstream",
			StartOffset:            "earliest",
			CommitInterval:         time.Second,
			FetchMaxWait:           100 * time.Millisecond,
			FetchMaxPartitionBytes: DefaultFetchMaxPartitionBytes,
			SessionTimeout:         45 * time.Second,
			RebalanceTimeout:       time.Minute,
			TopicPartitions:        4,
			CommitMetadataMaxBytes: 4096,
			RecordDoneOffsets:      ptr(true),
			StaticMembership:       ptr(true),
		},
		Host: Host{
			CompileCacheDir:    Auto,
			MaxInstances:       64,
			MaxInstanceMemory:  4 << 30,
			MaxInFlight:        200000,
			MaxAsyncInFlight:   10000,
			MaxHeldOutputBytes: 256 << 20,
			ClockResolution:    limits.DefaultClockResolution,
		},
		Shutdown: Shutdown{DrainTimeout: 10 * time.Second},
		Status:   Status{Interval: 10 * time.Second},
		Log:      Log{Level: "info", Format: "text"},
		Tracing: Tracing{
			Exporter:     "none",
			SampleRatio:  ptr(1.0), // DefaultFileSampleRatio with exporter: jsonl (applyDefaults)
			ServiceName:  "wasmstream",
			MaxFileBytes: DefaultTracingMaxFileBytes,
			MaxFiles:     DefaultTracingMaxFiles,
		},
		Metrics: Metrics{OTLP: MetricsOTLP{Interval: 30 * time.Second}},
		Admin: Admin{
			Enabled:           ptr(true),
			Listen:            "127.0.0.1:9465",
			StoreDir:          "wasmstream-store",
			MaxModuleBytes:    limits.MaxModuleBytes,
			Registry:          ptr(true),
			CanaryAbortMargin: ptr(0.05),
		},
		// The registry's bounds are internal/schemareg's own defaults,
		// stated here as config keys.
		SchemaRegistry: SchemaRegistry{
			RequestTimeout: 10 * time.Second,
			Cache:          SchemaRegistryCache{MaxSchemas: 1000, MaxBytes: 64 << 20},
			MaxSchemaBytes: 1 << 20,
			RefreshPeriod:  5 * time.Minute,
		},
	}
}

// PipelineDefaults returns the defaults of a pipeline's keys (a new value
// each call: it holds slices). Derived by applyDefaults: instances.max
// (instances.min, or the bound auto chooses under), retry.instances.max
// (DefaultRetryInstancesMax), retry.topic_prefix (the pipeline's group +
// DefaultRetryTopicSuffix) and async.max_in_flight: auto.
func PipelineDefaults() Pipeline {
	return Pipeline{
		Ordering:         OrderPartition,
		OutputTimestamp:  OutputTimeNow,
		Guarantee:        AtLeastOnce,
		MaxInFlight:      10000,
		MaxInFlightBytes: 32 << 20,
		BatchRecords:     DefaultBatchRecords,
		Weight:           1,
		Consume:          ConsumeGroup,
		VersionSource:    VersionSourceRegistry,
		Share:            Share{MaxRecords: 500},
		Redpanda:         Redpanda{OutputPartitioning: RedpandaPartitionKey},
		// A decoded value is at most 1 MiB of JSON, the broker's default
		// largest record (message.max.bytes): enough for the records of
		// most topics, and a worker's run holds at most about twice it.
		InputFormat: InputFormat{
			Value:        InputPart{Format: FormatRaw},
			Key:          InputPart{Format: FormatRaw},
			MaxJSONBytes: 1 << 20,
		},
		OutputFormat: OutputFormat{
			Value: OutputPart{Format: FormatRaw, SubjectStrategy: StrategyTopic, Version: "latest"},
			Key:   OutputPart{Format: FormatRaw, SubjectStrategy: StrategyTopic, Version: "latest"},
		},
		State: State{
			Dir:            Auto,
			MaxValueBytes:  64 << 10,
			MaxBytes:       1 << 30,
			RestoreTimeout: 5 * time.Minute,
		},
		Instances: Instances{
			Min:         1,
			IdleTimeout: 30 * time.Second,
			GrowAfter:   DefaultGrowAfter,
		},
		Limits: Limits{
			MemoryPages:       limits.MemoryPages,
			TableElements:     limits.TableElements,
			RecordTimeout:     limits.RecordTimeout,
			MaxOutputs:        limits.MaxOutputs,
			MaxOutputBytes:    limits.MaxOutputBytes,
			LogBytesPerSecond: limits.LogBytesPerSecond,
			LogBurstBytes:     limits.LogBurstBytes,
		},
		Transactions: Transactions{
			MaxRecords: 10000,
			Interval:   100 * time.Millisecond,
			Timeout:    time.Minute,
		},
		// Stated beside each operation (package host/asyncop).
		Async: asyncop.Defaults(),
		Retry: Retry{
			Mode:            RetryTopics,
			MaxAttempts:     4,
			Backoff:         []time.Duration{time.Second, 10 * time.Second, time.Minute},
			RetryableFaults: []string{"trap", "panic", "exit", "deadline", "oom", "instance_lost"},
			Instances: Instances{
				IdleTimeout: 10 * time.Second,
				GrowAfter:   DefaultGrowAfter,
			},
		},
	}
}

// applyDefaults sets every unset key to its default.
func (c *Config) applyDefaults() {
	if c.Tracing.SampleRatio == nil && c.Tracing.Exporter == "jsonl" {
		c.Tracing.SampleRatio = ptr(DefaultFileSampleRatio)
	}
	fillZero(reflect.ValueOf(c).Elem(), reflect.ValueOf(Defaults()))
	if c.Host.ID == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			c.Host.ID = h
		} else {
			c.Host.ID = DefaultHostID
		}
	}
	for _, f := range []*string{&c.Kafka.TLS.CAFile, &c.Kafka.TLS.CertFile, &c.Kafka.TLS.KeyFile, &c.Kafka.SASL.PasswordFile, &c.Kafka.SASL.TokenFile,
		&c.SchemaRegistry.TLS.CAFile, &c.SchemaRegistry.TLS.CertFile, &c.SchemaRegistry.TLS.KeyFile, &c.SchemaRegistry.BasicAuth.PasswordFile, &c.SchemaRegistry.TokenFile} {
		*f = c.AdminPath(*f)
	}
	if c.Tracing.File == "" && c.Tracing.Exporter == "jsonl" {
		c.Tracing.File = DefaultTracingFile
	}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		if p.Async.AutoInFlight {
			p.Async.MaxInFlight = AutoAsyncMaxInFlight
		}
		fillZero(reflect.ValueOf(p).Elem(), reflect.ValueOf(PipelineDefaults()))
		if p.Instances.Auto {
			// The bound auto chooses under; never below the minimum, which
			// Validate checks against it.
			p.Instances.Max = max(min(AutoMaxInstances, c.Host.MaxInstances, p.MaxInFlight), 1)
		}
		if p.Instances.Max == 0 {
			p.Instances.Max = p.Instances.Min
		}
		if p.Retry.Instances.Max == 0 {
			p.Retry.Instances.Max = max(p.Retry.Instances.Min, DefaultRetryInstancesMax)
		}
		if p.Retry.TopicPrefix == "" {
			p.Retry.TopicPrefix = c.GroupID(p) + DefaultRetryTopicSuffix
			p.Retry.TopicPrefixDefault = true
		}
		if p.State.Changelog == "" {
			p.State.Changelog = c.GroupID(p) + DefaultChangelogSuffix
		}
	}
}

// OldDefaultRetryTopicPrefix is the default retry.topic_prefix before it
// named the group: the pipeline's name + OldDefaultRetryTopicSuffix.
func (p *Pipeline) OldDefaultRetryTopicPrefix() string {
	return p.Name + OldDefaultRetryTopicSuffix
}

// OldDefaultRetryTopics are the retry topics the pipeline had under the old
// default prefix (its retry topics with OldDefaultRetryTopicPrefix), when
// topic_prefix is not set; none when it is set, or when both defaults
// name the same topics.
func (p *Pipeline) OldDefaultRetryTopics() []string {
	old := p.OldDefaultRetryTopicPrefix()
	if !p.Retry.TopicPrefixDefault || old == p.Retry.TopicPrefix {
		return nil
	}
	q := *p
	q.Retry.TopicPrefix = old
	return q.RetryTopics()
}

// fillZero sets each zero field of dst (a struct) to the same field of def,
// going into sections (nested structs). A list left empty but not unset
// (backoff: []) is not zero; a key whose default is true is a *bool, so that
// false can be told from unset.
func fillZero(dst, def reflect.Value) {
	for i := 0; i < dst.NumField(); i++ {
		d := dst.Field(i)
		switch {
		case d.Kind() == reflect.Struct:
			fillZero(d, def.Field(i))
		case d.IsZero():
			d.Set(def.Field(i))
		}
	}
}

func ptr[T any](v T) *T { return &v }
