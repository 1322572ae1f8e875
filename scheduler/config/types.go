package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/internal/faultkind"
)

// Embedded is the broker address that starts an in-process broker.
const Embedded = "embedded"

// Config is the whole configuration of a host.
type Config struct {
	Kafka     Kafka      `koanf:"kafka"`
	Pipelines []Pipeline `koanf:"pipelines"`
	Shutdown  Shutdown   `koanf:"shutdown"`
	Status    Status     `koanf:"status"`
	Log       Log        `koanf:"log"`
	Host      Host       `koanf:"host"`
	Tracing   Tracing    `koanf:"tracing"`
	Metrics   Metrics    `koanf:"metrics"`
	Admin     Admin      `koanf:"admin"`
	// SchemaRegistry is the process's schema registry (schema.go).
	SchemaRegistry SchemaRegistry `koanf:"schema_registry"`

	// Dir is the directory relative module paths are resolved against (the
	// config file's directory). Not a config key.
	Dir string `koanf:"-"`
}

// Kafka is how the host reaches the brokers.
type Kafka struct {
	Brokers        []string      `koanf:"brokers"`
	Group          string        `koanf:"group"`
	ClientID       string        `koanf:"client_id"`
	StartOffset    string        `koanf:"start_offset"`
	CommitInterval time.Duration `koanf:"commit_interval"`
	// FetchMaxWait is how long the broker may hold a fetch with no new
	// data. A partition resumed after backpressure is fetched only once the
	// fetch in flight for the others returns, so this is also the longest
	// a resumed partition waits (RATIONALE.md, "Backpressure").
	FetchMaxWait time.Duration `koanf:"fetch_max_wait"`
	// FetchMaxPartitionBytes is the most one fetch asks of a partition
	// (always at least one record batch). It is also what a paused task may
	// hold beyond its bounds: the records the client had fetched for it
	// before the pause are handed to it, not dropped (DESIGN.md,
	// "Backpressure").
	FetchMaxPartitionBytes int32         `koanf:"fetch_max_partition_bytes"`
	SessionTimeout         time.Duration `koanf:"session_timeout"`
	RebalanceTimeout       time.Duration `koanf:"rebalance_timeout"`
	CreateTopics           bool          `koanf:"create_topics"`
	TopicPartitions        int32         `koanf:"topic_partitions"`
	EmbeddedPort           int           `koanf:"embedded_port"`
	CommitMetadataMaxBytes int           `koanf:"commit_metadata_max_bytes"`
	RecordDoneOffsets      *bool         `koanf:"record_done_offsets"`
	// StaticMembership joins each pipeline's group as a static member
	// (KIP-345), group.instance.id "<group>.<host.id>": a host restarted
	// within session_timeout takes its partitions back at once, without a
	// rebalance. host.id must then differ between hosts.
	StaticMembership *bool `koanf:"static_membership"`
	// TLS and SASL secure every connection the process makes to the
	// brokers (internal/kafkaconn builds them; README.md, "Connecting to a
	// secured cluster").
	TLS  KafkaTLS  `koanf:"tls"`
	SASL KafkaSASL `koanf:"sasl"`
}

// KafkaTLS is the TLS of the connections to the brokers. Relative paths are
// the config file's directory's.
type KafkaTLS struct {
	// Enabled turns TLS on, verifying the brokers against the system roots
	// unless CAFile is set.
	Enabled bool   `koanf:"enabled"`
	CAFile  string `koanf:"ca_file"`
	// CertFile and KeyFile are the client's certificate and key (PEM) for
	// clusters that authenticate clients by certificate (mTLS). KeyFile must
	// be readable by its owner only.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ServerName is the name verified in the brokers' certificates instead
	// of the host of each broker's address.
	ServerName string `koanf:"server_name"`
	// InsecureSkipVerify accepts any certificate: for tests only, warned
	// about at every start.
	InsecureSkipVerify bool `koanf:"insecure_skip_verify"`
}

// KafkaSASL is how the host authenticates to the brokers. Secrets come from
// files readable by their owner only, or from the environment
// (WASMSTREAM_KAFKA_SASL_PASSWORD); they never appear in logs or errors.
type KafkaSASL struct {
	// Mechanism is one of SASLMechanisms, or "" for no SASL.
	Mechanism string `koanf:"mechanism"`
	Username  string `koanf:"username"`
	// Password or PasswordFile (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
	// Password is taken from the environment only
	// (WASMSTREAM_KAFKA_SASL_PASSWORD): its secret tag makes Load refuse
	// it in the config file and on --set (secrets.go).
	Password     string `koanf:"password" json:"-" secret:"kafka.sasl.password_file"`
	PasswordFile string `koanf:"password_file"`
	// TokenFile holds the OAUTHBEARER token, read again at every
	// authentication so a token refreshed by another process is taken.
	TokenFile string `koanf:"token_file"`
	// Region is the AWS region for AWS_MSK_IAM when the brokers' names do
	// not carry it (they do on MSK).
	Region string `koanf:"region"`
}

// SASLMechanisms are the values of kafka.sasl.mechanism.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"}

// String leaves the password out: a KafkaSASL printed anywhere carries no
// secret.
func (s KafkaSASL) String() string {
	pw := ""
	if s.Password != "" {
		pw = " password=<redacted>"
	}
	return fmt.Sprintf("{mechanism=%s username=%s%s password_file=%s token_file=%s region=%s}", s.Mechanism, s.Username, pw, s.PasswordFile, s.TokenFile, s.Region)
}

// Pipeline runs one module over its input topics.
type Pipeline struct {
	Name   string   `koanf:"name"`
	Module string   `koanf:"module"`
	Inputs []string `koanf:"inputs"`
	Output string   `koanf:"output"`
	// InputFormat and OutputFormat say how records are read and outputs
	// to Output written: raw bytes (the default) or framed by a schema
	// registry (schema.go; RATIONALE.md, "Schema-registry data").
	InputFormat     InputFormat  `koanf:"input_format"`
	OutputFormat    OutputFormat `koanf:"output_format"`
	AllowedOutputs  []string     `koanf:"allowed_outputs"`
	DeadLetterTopic string       `koanf:"dead_letter_topic"`
	Group           string       `koanf:"group"`
	Limits          Limits       `koanf:"limits"`
	Ordering        string       `koanf:"ordering"`
	// OutputTimestamp is the timestamp the pipeline's outputs carry:
	// OutputTimeNow (the release's clock) or OutputTimeInput (their
	// record's own, as Kafka Streams and Redpanda transforms give).
	OutputTimestamp  string    `koanf:"output_timestamp"`
	Instances        Instances `koanf:"instances"`
	MaxInFlight      int       `koanf:"max_in_flight"`
	MaxInFlightBytes int       `koanf:"max_in_flight_bytes"`
	// BatchRecords is how many records one call into an instance runs at
	// most (the batch entry, ABI.md §10; a module without it gets one
	// call per record, still taken as one run): 1 turns runs off.
	BatchRecords int   `koanf:"batch_records"`
	Retry        Retry `koanf:"retry"`
	Async        Async `koanf:"async"`
	// Guarantee is at_least_once (the default) or exactly_once: a record's
	// outputs, the retry or dead-letter copy it causes and its input offset
	// commit in one Kafka transaction (RATIONALE.md, "Exactly once").
	Guarantee    string       `koanf:"guarantee"`
	Transactions Transactions `koanf:"transactions"`
	// AllowCycles lets the pipeline be part of a cycle of pipelines feeding
	// each other, or read its own output: it is declared to end the loop
	// itself (topology.go).
	AllowCycles bool `koanf:"allow_cycles"`
	// Env is the module's environment (WASI environment variables): how a
	// processor is configured (a service URL, a feature switch). Never put
	// secrets here in plain text.
	Env map[string]string `koanf:"env"`
	// Weight is the pipeline's share of the host's guest-call slots (one per
	// core) relative to the other pipelines' while they all have records to
	// run; its retry workers share it (host/internal/slots).
	Weight int `koanf:"weight"`
	// Consume is how the pipeline takes its input records: group (a
	// consumer group: partitions are divided among the hosts) or share (a
	// share group, KIP-932: every host takes records of every partition
	// under a broker lock and acknowledges each one; ordering: none only,
	// not with exactly_once). RATIONALE.md, "Share groups".
	Consume string `koanf:"consume"`
	Share   Share  `koanf:"share"`
	// State gives the processor durable per-key state (ABI.md §4.1,
	// DESIGN.md "State", RATIONALE.md "State stores").
	State State `koanf:"state"`
	// Timers configures the firing of event-time timers (ABI.md §4.2).
	Timers Timers `koanf:"timers"`
	// VersionSource, ModuleLabel and Canary say what decides the version
	// the pipeline runs: the fleet registry (deploys through the admin
	// API), or this config (versionsource.go; README, "GitOps").
	VersionSource string       `koanf:"version_source"`
	ModuleLabel   string       `koanf:"module_label"`
	Canary        ConfigCanary `koanf:"canary"`
	// Redpanda is how a Redpanda Data Transform runs (redpanda.go).
	Redpanda Redpanda `koanf:"redpanda"`
}

// State configures a pipeline's state stores: one local store per input
// partition, backed by a compacted changelog topic.
// Timers configures a pipeline's event-time timers (ABI.md §4.2).
type Timers struct {
	// IdleAdvance, when set, advances the stream time of a partition that
	// is caught up and received nothing for that long by the wall-clock
	// time that passed, in steps no longer than it, firing the timers it
	// makes due in a round of their own (0: off, the default: stream time
	// moves with records only).
	IdleAdvance time.Duration `koanf:"idle_advance"`
}

// MinIdleAdvance is the shortest timers.idle_advance: a partition's
// idle check runs that often.
const MinIdleAdvance = 100 * time.Millisecond

type State struct {
	Enabled bool `koanf:"enabled"`
	// Dir holds the local stores: "auto" (the default) is DefaultStateDir
	// under the user's cache directory; a relative path is the config
	// file's directory's. See Config.StateDir.
	Dir string `koanf:"dir"`
	// MaxValueBytes bounds one value (state_put); keys are bounded by
	// abi.MaxStateKeyBytes.
	MaxValueBytes int `koanf:"max_value_bytes"`
	// MaxBytes bounds one partition's state: its keys' and values' bytes
	// (the store's, and the writes not yet applied to it). A state_put
	// that would grow the state past it returns errno 5 (RATIONALE.md,
	// "State stores").
	MaxBytes int64 `koanf:"max_bytes"`
	// Changelog is the changelog topic; default "<group>.changelog" (the
	// pipeline's consumer group, GroupID).
	Changelog string `koanf:"changelog"`
	// RestoreTimeout bounds the restore of one partition's store when the
	// partition is assigned; past it the pipeline fails.
	RestoreTimeout time.Duration `koanf:"restore_timeout"`
}

// Consumption modes (pipelines[].consume).
const (
	ConsumeGroup = "group" // a consumer group: one owner per partition, offsets committed
	ConsumeShare = "share" // a share group (KIP-932): records acquired under a lock, acknowledged one by one
)

// Share tunes a consume: share pipeline.
type Share struct {
	// MaxRecords is the most records one poll acquires (locks the host
	// holds at a time): the next poll waits until every one of them is
	// acknowledged. At most max_in_flight.
	MaxRecords int `koanf:"max_records"`
}

// Delivery guarantees.
const (
	AtLeastOnce = "at_least_once"
	ExactlyOnce = "exactly_once"
)

// Transactions tunes an exactly_once pipeline's transactions: one is
// committed once max_records records were released into it, or interval
// after it began, whichever comes first.
type Transactions struct {
	MaxRecords int           `koanf:"max_records"`
	Interval   time.Duration `koanf:"interval"`
	// Timeout is the broker's transaction.timeout.ms for this producer: a
	// transaction left open longer (a host paused or cut off) is aborted.
	Timeout time.Duration `koanf:"timeout"`
	// ID is the transactional id prefix; the default is the pipeline's group
	// and host.id. It must be stable across restarts of one host (a restart
	// then aborts what the killed process left open at once) and differ
	// between hosts.
	ID string `koanf:"id"`
}

// Async configures a pipeline's asynchronous operations (ABI.md, section
// 7): its bounds and each operation kind's section, with their defaults and
// checks, are package host/asyncop's, which the host takes whole.
type Async = asyncop.Config

// Retry configures what happens to a record that fails retryably.
type Retry struct {
	Mode            string          `koanf:"mode"`
	MaxAttempts     int             `koanf:"max_attempts"`
	Backoff         []time.Duration `koanf:"backoff"`
	TopicPrefix     string          `koanf:"topic_prefix"`
	RetryableFaults []string        `koanf:"retryable_faults"`
	Instances       Instances       `koanf:"instances"`
	// TopicPrefixDefault: topic_prefix was not set, and is the default
	// (the pipeline's group + DefaultRetryTopicSuffix). Only then may
	// records wait in retry topics of the old default's names
	// (Pipeline.OldDefaultRetryTopicPrefix).
	TopicPrefixDefault bool `koanf:"-"`
}

// Retry modes.
const (
	RetryTopics = "topics" // failed records go to a retry topic per backoff tier; secondary workers retry them
	RetryInline = "inline" // retry in place, blocking the record's partition (or key) only
)

// FaultKinds are the guest fault kinds retry.retryable_faults may name
// (faultkind.Retryable, as strings).
var FaultKinds = faultkind.RetryableNames()

// TierTopic is the retry topic of backoff tier i.
func (p *Pipeline) TierTopic(i int) string {
	return p.Retry.TopicPrefix + "." + compactDuration(p.Retry.Backoff[i])
}

// RetryTopics are the pipeline's retry topics, one per distinct backoff
// tier, or none when records are not retried through topics.
func (p *Pipeline) RetryTopics() []string {
	if p.Retry.Mode != RetryTopics || p.Retry.MaxAttempts < 2 {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for i := range p.Retry.Backoff {
		if t := p.TierTopic(i); !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// Delay is the wait before attempt (attempt >= 2): the backoff tier
// attempt-2, the last tier repeating.
func (p *Pipeline) Delay(attempt int) (time.Duration, int) {
	i := min(max(attempt-2, 0), len(p.Retry.Backoff)-1)
	return p.Retry.Backoff[i], i
}

func compactDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0 && d > 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d > 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// Output timestamps (pipelines[].output_timestamp).
const (
	OutputTimeNow   = "now"   // when the record's outcome was released to the producer
	OutputTimeInput = "input" // the input record's own timestamp
)

// Ordering modes.
const (
	OrderPartition = "partition" // one record at a time per partition, in offset order
	OrderKey       = "key"       // one record at a time per key, in offset order; keys run concurrently
	OrderNone      = "none"      // any record on any free instance
)

// Instances sizes a partition task's pool of module instances.
type Instances struct {
	Min         int           `koanf:"min"`
	Max         int           `koanf:"max"`
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// GrowAfter is how long records must wait with every instance busy
	// before the task borrows another instance (and between two borrows).
	GrowAfter time.Duration `koanf:"grow_after"`
	// Auto is instances: auto (or max: auto): the host chooses each task's
	// maximum itself, between Min and Max, from what it measures
	// (scheduler/autosize.go); Max is then the bound it chooses under
	// (AutoMaxInstances, host.max_instances and max_in_flight).
	Auto bool `koanf:"-"`
}

// Self-sizing (instances: auto, async.max_in_flight: auto): the bounds the
// host's controllers move within. Their tuning is in scheduler/autosize.go.
const (
	// Auto is the value that asks the host to choose a size itself.
	Auto = "auto"
	// AutoMaxInstances bounds instances: auto per partition task (host.max_instances
	// and the pipeline's max_in_flight bound it too).
	AutoMaxInstances = 64
	// AutoAsyncMaxInFlight bounds async.max_in_flight: auto per instance.
	AutoAsyncMaxInFlight = 1024
	// AutoAsyncInitialInFlight is where async.max_in_flight: auto starts.
	AutoAsyncInitialInFlight = 4
)

// Limits bound each instance of a pipeline's module.
type Limits struct {
	MemoryPages    uint32        `koanf:"memory_pages"`
	TableElements  uint32        `koanf:"table_elements"`
	RecordTimeout  time.Duration `koanf:"record_timeout"`
	MaxOutputs     int           `koanf:"max_outputs"`
	MaxOutputBytes int           `koanf:"max_output_bytes"`
	// LogBytesPerSecond and LogBurstBytes rate-limit each instance's guest
	// log lines (a line costs its message plus 256 bytes); lines over them
	// are dropped and counted.
	LogBytesPerSecond int `koanf:"log_bytes_per_second"`
	LogBurstBytes     int `koanf:"log_burst_bytes"`
}

// Shutdown bounds each stage of a graceful stop.
type Shutdown struct {
	DrainTimeout time.Duration `koanf:"drain_timeout"`
}

// Status configures the periodic status line.
type Status struct {
	Interval time.Duration `koanf:"interval"`
}

// Log configures logging.
type Log struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// Metrics configures the metrics and health endpoints.
type Metrics struct {
	// Listen is where /metrics (Prometheus), /healthz and /readyz are
	// served; "" turns them off. Port 0 picks a free port (logged).
	Listen string `koanf:"listen"`
	// OTLP pushes the same metrics to an OTLP/HTTP receiver (a collector)
	// when its endpoint is set; credentials from OTEL_EXPORTER_OTLP_HEADERS.
	OTLP MetricsOTLP `koanf:"otlp"`
	// DashboardHosts are the names, besides localhost and loopback
	// addresses, under which a browser may open the dashboard of a
	// loopback listener: a request naming any other host is refused, so
	// that a page of another site made to resolve to 127.0.0.1 (DNS
	// rebinding) cannot read it.
	DashboardHosts []string `koanf:"dashboard_hosts"`
}

// MetricsOTLP configures pushing metrics over OTLP/HTTP.
type MetricsOTLP struct {
	Endpoint string        `koanf:"endpoint"`
	Insecure bool          `koanf:"insecure"`
	Interval time.Duration `koanf:"interval"`
}

// Admin configures the admin API. Its bearer token comes from the
// WASMSTREAM_ADMIN_TOKEN environment variable or token_file, never from this
// file; with no token the host refuses to start unless enabled is false.
type Admin struct {
	Enabled        *bool  `koanf:"enabled"`
	Listen         string `koanf:"listen"`
	TokenFile      string `koanf:"token_file"`
	StoreDir       string `koanf:"store_dir"`
	MaxModuleBytes int64  `koanf:"max_module_bytes"`
	// Registry keeps the fleet's modules and deployments in Kafka
	// (scheduler/registry): a deploy on any host reaches every host of
	// the group, and a host that starts later runs the deployed version.
	Registry *bool `koanf:"registry"`
	// RegistryTopicPrefix names the registry's topics (<prefix>.modules,
	// .deploys, .hosts); default <kafka.group>.registry, so that they
	// start with <kafka.group>. as every name the host makes does (and a
	// prefixed ACL on it covers them). The default was
	// wasmstream.<kafka.group>: where those topics exist and the new ones
	// do not, the registry keeps them (registry.Config.OldPrefix).
	RegistryTopicPrefix string `koanf:"registry_topic_prefix"`
	// CanaryAbortMargin: a canary whose failure rate across the fleet
	// exceeds the stable version's by more than this share (0.05: five
	// percentage points) is aborted automatically; 0 never.
	CanaryAbortMargin *float64 `koanf:"canary_abort_margin"`
}

// RegistryPrefix resolves admin.registry_topic_prefix.
func (c *Config) RegistryPrefix() string {
	if c.Admin.RegistryTopicPrefix != "" {
		return c.Admin.RegistryTopicPrefix
	}
	return c.Kafka.Group + DefaultRegistryTopicSuffix
}

// OldDefaultRegistryPrefix is the registry's prefix by the previous
// default (OldDefaultRegistryTopicPrefix + kafka.group) when
// admin.registry_topic_prefix is not set, else "": a fleet that ran before
// the default changed keeps its registry there.
func (c *Config) OldDefaultRegistryPrefix() string {
	if c.Admin.RegistryTopicPrefix != "" {
		return ""
	}
	return OldDefaultRegistryTopicPrefix + c.Kafka.Group
}

// AdminPath resolves a path of the admin section against the config's
// directory.
func (c *Config) AdminPath(p string) string {
	if p == "" || filepath.IsAbs(p) || c.Dir == "" {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// Tracing configures OpenTelemetry tracing of records.
type Tracing struct {
	// Exporter: none, jsonl (a file), stdout, otlp-grpc or otlp-http.
	Exporter string `koanf:"exporter"`
	// Endpoint is the OTLP receiver, host:port. Credentials come from the
	// standard OTEL_EXPORTER_OTLP_HEADERS environment variable, never from
	// this file.
	Endpoint string `koanf:"endpoint"`
	Insecure bool   `koanf:"insecure"`
	// File is the JSON-lines file (relative to the config's directory).
	File string `koanf:"file"`
	// SampleRatio is the share of healthy records traced; records that fail
	// are always traced in full. Default 1, and DefaultFileSampleRatio
	// with exporter: jsonl.
	SampleRatio *float64 `koanf:"sample_ratio"`
	ServiceName string   `koanf:"service_name"`
	// MaxFileBytes rotates the jsonl file once it reaches this size: it
	// becomes <file>.1 (an older .1 becomes .2, and so on), and MaxFiles
	// rotated parts are kept (tracing/rotate.go).
	MaxFileBytes int64 `koanf:"max_file_bytes"`
	MaxFiles     int   `koanf:"max_files"`
}

// TracingFile resolves tracing.file.
func (c *Config) TracingFile() string {
	if filepath.IsAbs(c.Tracing.File) || c.Dir == "" {
		return c.Tracing.File
	}
	return filepath.Join(c.Dir, c.Tracing.File)
}

// CompileCacheDir resolves host.compile_cache_dir: the directory ("" for
// none) and whether it is the default one (auto), which a host may do
// without if it cannot be used.
func (c *Config) CompileCacheDir() (dir string, auto bool, err error) {
	switch d := c.Host.CompileCacheDir; {
	case d == CompileCacheNone || d == "":
		return "", false, nil
	case d == Auto:
		base, err := os.UserCacheDir()
		if err != nil {
			return "", true, fmt.Errorf("host.compile_cache_dir: auto: %w", err)
		}
		return filepath.Join(base, DefaultCompileCacheDir), true, nil
	case filepath.IsAbs(d) || c.Dir == "":
		return d, false, nil
	default:
		return filepath.Join(c.Dir, d), false, nil
	}
}

// StateDir is where the local state stores of pc live (state.dir).
func (c *Config) StateDir(pc *Pipeline) (string, error) {
	switch d := pc.State.Dir; {
	case d == Auto || d == "":
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("pipelines[%s].state.dir: auto: %w", pc.Name, err)
		}
		return filepath.Join(base, DefaultStateDir), nil
	case filepath.IsAbs(d) || c.Dir == "":
		return d, nil
	default:
		return filepath.Join(c.Dir, d), nil
	}
}

// Host configures the WebAssembly host.
type Host struct {
	// CompileCacheDir keeps compiled modules on disk across restarts:
	// "auto" (the default) is DefaultCompileCacheDir under the user's cache
	// directory, "none" keeps them in memory only; a relative path is the
	// config file's directory's. See CompileCacheDir.
	CompileCacheDir   string `koanf:"compile_cache_dir"`
	MaxInstances      int    `koanf:"max_instances"`
	MaxInstanceMemory int64  `koanf:"max_instance_memory"`
	MaxInFlight       int    `koanf:"max_in_flight"`
	MaxAsyncInFlight  int    `koanf:"max_async_in_flight"`
	// MaxHeldOutputBytes bounds the bytes of emitted outputs the host holds:
	// those of records running or waiting on asynchronous operations, and
	// those produced until the broker acknowledged them. Records are not
	// started at half of it; emit refuses an output past it.
	MaxHeldOutputBytes int64 `koanf:"max_held_output_bytes"`
	// ID names this host among the group's members: stable across its
	// restarts, different between hosts (exactly_once transactional ids are
	// derived from it). The default is the machine's hostname.
	ID string `koanf:"id"`
	// ClockResolution is the resolution of the clocks guests read (the wall
	// clock and the monotonic clock): a coarse clock is a poor instrument
	// for timing side channels (host/clock.go).
	ClockResolution time.Duration `koanf:"clock_resolution"`
}

// GroupID is the consumer group of the pipeline: its own group key, or
// kafka.group + "." + its name. Each pipeline is its own group so that two
// pipelines reading one topic each see all of it.
func (c *Config) GroupID(p *Pipeline) string {
	if p.Group != "" {
		return p.Group
	}
	return c.Kafka.Group + "." + p.Name
}

// RetryGroupID is the consumer group of the pipeline's retry workers.
func (c *Config) RetryGroupID(p *Pipeline) string { return c.GroupID(p) + ".retry" }

// ModulePath resolves the pipeline's module path.
func (c *Config) ModulePath(p *Pipeline) string {
	if filepath.IsAbs(p.Module) || c.Dir == "" {
		return p.Module
	}
	return filepath.Join(c.Dir, p.Module)
}

// IsEmbedded reports whether the host runs its own in-process broker.
func (c *Config) IsEmbedded() bool {
	return len(c.Kafka.Brokers) == 1 && c.Kafka.Brokers[0] == Embedded
}
