// Package config is wasmstream's one configuration path: the YAML file,
// overridden by WASMSTREAM_* environment variables, overridden by flags, into
// one typed Config, checked by one Validate that lists every problem with the
// key it concerns. Unknown keys are errors. The commented config.yaml at the
// repository root is the reference for every key.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/wasmstream/wasmstream/host"
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
	FetchMaxWait           time.Duration `koanf:"fetch_max_wait"`
	SessionTimeout         time.Duration `koanf:"session_timeout"`
	RebalanceTimeout       time.Duration `koanf:"rebalance_timeout"`
	CreateTopics           bool          `koanf:"create_topics"`
	TopicPartitions        int32         `koanf:"topic_partitions"`
	EmbeddedPort           int           `koanf:"embedded_port"`
	CommitMetadataMaxBytes int           `koanf:"commit_metadata_max_bytes"`
	RecordDoneOffsets      *bool         `koanf:"record_done_offsets"`
}

// Pipeline runs one module over its input topics.
type Pipeline struct {
	Name             string    `koanf:"name"`
	Module           string    `koanf:"module"`
	Inputs           []string  `koanf:"inputs"`
	Output           string    `koanf:"output"`
	AllowedOutputs   []string  `koanf:"allowed_outputs"`
	DeadLetterTopic  string    `koanf:"dead_letter_topic"`
	Group            string    `koanf:"group"`
	Limits           Limits    `koanf:"limits"`
	Ordering         string    `koanf:"ordering"`
	Instances        Instances `koanf:"instances"`
	MaxInFlight      int       `koanf:"max_in_flight"`
	MaxInFlightBytes int       `koanf:"max_in_flight_bytes"`
	Retry            Retry     `koanf:"retry"`
	Async            Async     `koanf:"async"`
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

// Async configures a pipeline's asynchronous operations (ABI.md, section 7).
type Async struct {
	// MaxInFlight bounds the operations in flight per instance: while an
	// instance has that many outstanding, it takes no new record. With
	// max_in_flight: auto (AutoInFlight) it is the bound the host's limit
	// moves under (AutoAsyncMaxInFlight).
	MaxInFlight int `koanf:"max_in_flight"`
	// AutoInFlight is max_in_flight: auto: the host sets the operations in
	// flight per instance from the latency it measures (scheduler/autosize.go).
	AutoInFlight bool `koanf:"-"`
	// MaxPerRecord bounds the operations one record may have outstanding.
	MaxPerRecord int       `koanf:"max_per_record"`
	HTTP         AsyncHTTP `koanf:"http"`
}

// AsyncHTTP configures guests' HTTP requests. With no allow_hosts, every
// request is refused.
type AsyncHTTP struct {
	AllowHosts       []string      `koanf:"allow_hosts"`
	Timeout          time.Duration `koanf:"timeout"`
	ConnectTimeout   time.Duration `koanf:"connect_timeout"`
	MaxResponseBytes int64         `koanf:"max_response_bytes"`
	MaxRequestBytes  int           `koanf:"max_request_bytes"`
}

// Retry configures what happens to a record that fails retryably.
type Retry struct {
	Mode            string          `koanf:"mode"`
	MaxAttempts     int             `koanf:"max_attempts"`
	Backoff         []time.Duration `koanf:"backoff"`
	TopicPrefix     string          `koanf:"topic_prefix"`
	RetryableFaults []string        `koanf:"retryable_faults"`
	Instances       Instances       `koanf:"instances"`
}

// Retry modes.
const (
	RetryTopics = "topics" // failed records go to a retry topic per backoff tier; secondary workers retry them
	RetryInline = "inline" // retry in place, blocking the record's partition (or key) only
)

// FaultKinds are the guest fault kinds retry.retryable_faults may name.
var FaultKinds = []string{"trap", "panic", "exit", "deadline", "oom", "bad_pointer", "protocol", "instance_lost"}

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

// Ordering modes.
const (
	OrderPartition = "partition" // one record at a time per partition, in offset order
	OrderKey       = "key"       // one record at a time per key, in offset order; keys run concurrently
	OrderNone      = "none"      // any record on any free instance
)

// DefaultGrowAfter is instances.grow_after unless set. It is small next to
// a person's sense of latency and large next to one fetch batch of fast
// records, so that a batch arriving while an instance is busy does not grow
// the pool; instances are never created per record.
const DefaultGrowAfter = 20 * time.Millisecond

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
	// are always traced in full.
	SampleRatio *float64 `koanf:"sample_ratio"`
	ServiceName string   `koanf:"service_name"`
}

// TracingFile resolves tracing.file.
func (c *Config) TracingFile() string {
	if filepath.IsAbs(c.Tracing.File) || c.Dir == "" {
		return c.Tracing.File
	}
	return filepath.Join(c.Dir, c.Tracing.File)
}

// Host configures the WebAssembly host.
type Host struct {
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

func (c *Config) applyDefaults() {
	k := &c.Kafka
	if k.ClientID == "" {
		k.ClientID = "wasmstream"
	}
	if k.StartOffset == "" {
		k.StartOffset = "earliest"
	}
	if k.FetchMaxWait == 0 {
		k.FetchMaxWait = 100 * time.Millisecond
	}
	if k.CommitInterval == 0 {
		k.CommitInterval = time.Second
	}
	if k.SessionTimeout == 0 {
		k.SessionTimeout = 45 * time.Second
	}
	if k.RebalanceTimeout == 0 {
		k.RebalanceTimeout = time.Minute
	}
	if k.TopicPartitions == 0 {
		k.TopicPartitions = 4
	}
	if k.RecordDoneOffsets == nil {
		t := true
		k.RecordDoneOffsets = &t
	}
	if k.CommitMetadataMaxBytes == 0 {
		k.CommitMetadataMaxBytes = 4096
	}
	if c.Host.MaxInstances == 0 {
		c.Host.MaxInstances = 64
	}
	if c.Host.MaxInstanceMemory == 0 {
		c.Host.MaxInstanceMemory = 4 << 30
	}
	if c.Host.MaxInFlight == 0 {
		c.Host.MaxInFlight = 200000
	}
	if c.Host.MaxAsyncInFlight == 0 {
		c.Host.MaxAsyncInFlight = 10000
	}
	if c.Host.MaxHeldOutputBytes == 0 {
		c.Host.MaxHeldOutputBytes = 256 << 20
	}
	if c.Host.ID == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			c.Host.ID = h
		} else {
			c.Host.ID = "wasmstream"
		}
	}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		if p.Guarantee == "" {
			p.Guarantee = AtLeastOnce
		}
		if p.Transactions.MaxRecords == 0 {
			p.Transactions.MaxRecords = 10000
		}
		if p.Transactions.Interval == 0 {
			p.Transactions.Interval = 100 * time.Millisecond
		}
		if p.Transactions.Timeout == 0 {
			p.Transactions.Timeout = time.Minute
		}
		if p.Limits.MemoryPages == 0 { // limits' defaults are the host's
			p.Limits.MemoryPages = host.DefaultLimits.MemoryPages
		}
		if p.Limits.TableElements == 0 {
			p.Limits.TableElements = host.DefaultLimits.TableElements
		}
		if p.Limits.RecordTimeout == 0 {
			p.Limits.RecordTimeout = host.DefaultLimits.RecordTimeout
		}
		if p.Limits.MaxOutputs == 0 {
			p.Limits.MaxOutputs = host.DefaultLimits.MaxOutputs
		}
		if p.Limits.MaxOutputBytes == 0 {
			p.Limits.MaxOutputBytes = host.DefaultLimits.MaxOutputBytes
		}
		if p.Limits.LogBytesPerSecond == 0 {
			p.Limits.LogBytesPerSecond = host.DefaultLimits.LogBytesPerSecond
		}
		if p.Limits.LogBurstBytes == 0 {
			p.Limits.LogBurstBytes = host.DefaultLimits.LogBurstBytes
		}
		if p.Ordering == "" {
			p.Ordering = OrderPartition
		}
		if p.Instances.Min == 0 {
			p.Instances.Min = 1
		}
		if p.MaxInFlight == 0 {
			p.MaxInFlight = 10000
		}
		if p.Instances.Auto {
			// The bound auto chooses under; never below the minimum, which
			// Validate checks against it.
			p.Instances.Max = max(min(AutoMaxInstances, c.Host.MaxInstances, p.MaxInFlight), 1)
		}
		if p.Instances.Max == 0 {
			p.Instances.Max = p.Instances.Min
		}
		if p.Instances.IdleTimeout == 0 {
			p.Instances.IdleTimeout = 30 * time.Second
		}
		if p.Instances.GrowAfter == 0 {
			p.Instances.GrowAfter = DefaultGrowAfter
		}
		if p.MaxInFlightBytes == 0 {
			p.MaxInFlightBytes = 32 << 20
		}
		if p.Weight == 0 {
			p.Weight = 1
		}
		a := &p.Async
		if a.AutoInFlight {
			a.MaxInFlight = AutoAsyncMaxInFlight
		}
		if a.MaxInFlight == 0 {
			a.MaxInFlight = 64
		}
		if a.MaxPerRecord == 0 {
			a.MaxPerRecord = 16
		}
		if a.HTTP.Timeout == 0 {
			a.HTTP.Timeout = 10 * time.Second
		}
		if a.HTTP.ConnectTimeout == 0 {
			a.HTTP.ConnectTimeout = 3 * time.Second
		}
		if a.HTTP.MaxResponseBytes == 0 {
			a.HTTP.MaxResponseBytes = 1 << 20
		}
		if a.HTTP.MaxRequestBytes == 0 {
			a.HTTP.MaxRequestBytes = 1 << 20
		}
		r := &p.Retry
		if r.Mode == "" {
			r.Mode = RetryTopics
		}
		if r.MaxAttempts == 0 {
			r.MaxAttempts = 4
		}
		if r.Backoff == nil {
			r.Backoff = []time.Duration{time.Second, 10 * time.Second, time.Minute}
		}
		if r.TopicPrefix == "" {
			r.TopicPrefix = p.Name + ".retry"
		}
		if r.RetryableFaults == nil {
			r.RetryableFaults = []string{"trap", "panic", "exit", "deadline", "oom", "instance_lost"}
		}
		if r.Instances.Max == 0 {
			r.Instances.Max = max(r.Instances.Min, 2)
		}
		if r.Instances.IdleTimeout == 0 {
			r.Instances.IdleTimeout = 10 * time.Second
		}
		if r.Instances.GrowAfter == 0 {
			r.Instances.GrowAfter = DefaultGrowAfter
		}
	}
	if c.Shutdown.DrainTimeout == 0 {
		c.Shutdown.DrainTimeout = 10 * time.Second
	}
	if c.Metrics.OTLP.Interval == 0 {
		c.Metrics.OTLP.Interval = 30 * time.Second
	}
	if c.Admin.Enabled == nil {
		t := true
		c.Admin.Enabled = &t
	}
	if c.Admin.Listen == "" {
		c.Admin.Listen = "127.0.0.1:9465"
	}
	if c.Admin.StoreDir == "" {
		c.Admin.StoreDir = "wasmstream-store"
	}
	if c.Admin.MaxModuleBytes == 0 {
		c.Admin.MaxModuleBytes = 64 << 20
	}
	tr := &c.Tracing
	if tr.Exporter == "" {
		tr.Exporter = "none"
	}
	if tr.SampleRatio == nil {
		one := 1.0
		tr.SampleRatio = &one
	}
	if tr.ServiceName == "" {
		tr.ServiceName = "wasmstream"
	}
	if tr.File == "" && tr.Exporter == "jsonl" {
		tr.File = "wasmstream-traces.jsonl"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
}

// Problems is every problem found in a configuration.
type Problems []string

func (p Problems) Error() string {
	if len(p) == 1 {
		return "invalid config: " + p[0]
	}
	return "invalid config:\n  - " + strings.Join(p, "\n  - ")
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// Validate checks the configuration and returns Problems listing every
// problem, each naming its key, or nil.
func (c *Config) Validate() error {
	var probs Problems
	add := func(key, format string, args ...any) {
		probs = append(probs, key+": "+fmt.Sprintf(format, args...))
	}
	k := &c.Kafka
	if len(k.Brokers) == 0 {
		add("kafka.brokers", "at least one broker address is required (host:port), or [embedded] for an in-process broker")
	}
	for i, b := range k.Brokers {
		switch {
		case b == Embedded && len(k.Brokers) > 1:
			add(fmt.Sprintf("kafka.brokers[%d]", i), "%q starts an in-process broker and cannot be combined with other addresses", Embedded)
		case b != Embedded && !strings.Contains(b, ":"):
			add(fmt.Sprintf("kafka.brokers[%d]", i), "%q is not host:port", b)
		}
	}
	if k.Group == "" {
		add("kafka.group", "a consumer group name is required")
	}
	if k.StartOffset != "earliest" && k.StartOffset != "latest" {
		add("kafka.start_offset", "%q: want earliest or latest", k.StartOffset)
	}
	if k.FetchMaxWait < time.Millisecond || k.FetchMaxWait > 30*time.Second {
		add("kafka.fetch_max_wait", "%s: want 1ms to 30s", k.FetchMaxWait)
	}
	if k.CommitInterval < 10*time.Millisecond {
		add("kafka.commit_interval", "%s is below the minimum of 10ms", k.CommitInterval)
	}
	if k.SessionTimeout < time.Second {
		add("kafka.session_timeout", "%s is below the minimum of 1s", k.SessionTimeout)
	}
	if k.RebalanceTimeout < time.Second {
		add("kafka.rebalance_timeout", "%s is below the minimum of 1s", k.RebalanceTimeout)
	}
	if k.TopicPartitions < 1 {
		add("kafka.topic_partitions", "%d: want at least 1", k.TopicPartitions)
	}
	if k.EmbeddedPort < 0 || k.EmbeddedPort > 65535 {
		add("kafka.embedded_port", "%d is not a port", k.EmbeddedPort)
	}
	if len(c.Pipelines) == 0 {
		add("pipelines", "at least one pipeline is required")
	}
	names := map[string]int{}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		key := func(sub string) string { return fmt.Sprintf("pipelines[%d].%s", i, sub) }
		if !nameRE.MatchString(p.Name) {
			add(key("name"), "%q: want 1-100 characters of letters, digits, '.', '_' or '-'", p.Name)
		} else if j, dup := names[p.Name]; dup {
			add(key("name"), "%q is also the name of pipelines[%d]", p.Name, j)
		} else {
			names[p.Name] = i
		}
		if p.Module == "" {
			add(key("module"), "a module path is required")
		} else if st, err := os.Stat(c.ModulePath(p)); err != nil {
			add(key("module"), "%v", errors.Unwrap(err))
			if errors.Is(err, os.ErrNotExist) {
				probs[len(probs)-1] = key("module") + fmt.Sprintf(": %s does not exist", c.ModulePath(p))
			}
		} else if st.IsDir() {
			add(key("module"), "%s is a directory, want a .wasm file", c.ModulePath(p))
		}
		if len(p.Inputs) == 0 {
			add(key("inputs"), "at least one input topic is required")
		}
		inputs := map[string]bool{}
		for j, t := range p.Inputs {
			if !validTopic(t) {
				add(fmt.Sprintf("pipelines[%d].inputs[%d]", i, j), "%q is not a valid topic name", t)
			}
			if inputs[t] {
				add(fmt.Sprintf("pipelines[%d].inputs[%d]", i, j), "%q is listed twice", t)
			}
			inputs[t] = true
		}
		if p.Output == "" {
			add(key("output"), "an output topic is required")
		} else if !validTopic(p.Output) {
			add(key("output"), "%q is not a valid topic name", p.Output)
		} else if inputs[p.Output] && !p.AllowCycles {
			add(key("output"), "%q is also an input: the pipeline would consume its own output (set allow_cycles: true if it ends the loop itself)", p.Output)
		}
		for j, t := range p.AllowedOutputs {
			if !validTopic(t) {
				add(fmt.Sprintf("pipelines[%d].allowed_outputs[%d]", i, j), "%q is not a valid topic name", t)
			} else if inputs[t] && !p.AllowCycles {
				add(fmt.Sprintf("pipelines[%d].allowed_outputs[%d]", i, j), "%q is also an input: the pipeline would consume its own output (set allow_cycles: true if it ends the loop itself)", t)
			}
		}
		switch {
		case p.DeadLetterTopic == "":
			add(key("dead_letter_topic"), "a dead-letter topic is required: a record that fails goes there, it is never dropped")
		case !validTopic(p.DeadLetterTopic):
			add(key("dead_letter_topic"), "%q is not a valid topic name", p.DeadLetterTopic)
		case inputs[p.DeadLetterTopic] || p.DeadLetterTopic == p.Output:
			add(key("dead_letter_topic"), "%q must differ from the pipeline's inputs and output", p.DeadLetterTopic)
		}
		if p.Group != "" && !nameRE.MatchString(p.Group) {
			add(key("group"), "%q is not a valid group name", p.Group)
		}
		l := &p.Limits
		if l.MemoryPages < 1 || l.MemoryPages > 65536 {
			add(key("limits.memory_pages"), "%d: want 1 to 65536 pages of 64 KiB", l.MemoryPages)
		}
		if l.TableElements < 1 || l.TableElements > host.MaxTableElements {
			add(key("limits.table_elements"), "%d: want 1 to %d table elements of 8 bytes", l.TableElements, host.MaxTableElements)
		}
		if l.RecordTimeout < time.Millisecond || l.RecordTimeout > time.Hour {
			add(key("limits.record_timeout"), "%s: want 1ms to 1h", l.RecordTimeout)
		}
		if l.MaxOutputs < 1 {
			add(key("limits.max_outputs"), "%d: want at least 1", l.MaxOutputs)
		}
		if l.MaxOutputBytes < 1024 || l.MaxOutputBytes > 1<<30 {
			add(key("limits.max_output_bytes"), "%d: want 1 KiB to 1 GiB", l.MaxOutputBytes)
		}
		if l.LogBytesPerSecond < 1 || l.LogBytesPerSecond > 1<<30 {
			add(key("limits.log_bytes_per_second"), "%d: want 1 to 1 GiB", l.LogBytesPerSecond)
		}
		if l.LogBurstBytes < 8<<10 || l.LogBurstBytes > 1<<30 {
			add(key("limits.log_burst_bytes"), "%d: want 8 KiB to 1 GiB (a burst holds at least one full 4 KiB line)", l.LogBurstBytes)
		}
		if p.MaxInFlight < 1 || p.MaxInFlight > 1_000_000 {
			add(key("max_in_flight"), "%d: want 1 to 1000000", p.MaxInFlight)
		}
		if p.MaxInFlightBytes < 1024 || p.MaxInFlightBytes > 1<<34 {
			add(key("max_in_flight_bytes"), "%d: want 1 KiB to 16 GiB", p.MaxInFlightBytes)
		}
		if p.Weight < 1 || p.Weight > 1000 {
			add(key("weight"), "%d: want 1 to 1000", p.Weight)
		}
		switch p.Ordering {
		case OrderPartition, OrderKey, OrderNone:
		default:
			add(key("ordering"), "%q: want partition, key or none", p.Ordering)
		}
		switch p.Guarantee {
		case AtLeastOnce, ExactlyOnce:
		default:
			add(key("guarantee"), "%q: want at_least_once or exactly_once", p.Guarantee)
		}
		if tx := &p.Transactions; p.Guarantee == ExactlyOnce {
			if tx.MaxRecords < 1 || tx.MaxRecords > 1_000_000 {
				add(key("transactions.max_records"), "%d: want 1 to 1000000", tx.MaxRecords)
			}
			if tx.Timeout < time.Second || tx.Timeout > 15*time.Minute {
				add(key("transactions.timeout"), "%s: want 1s to 15m (the broker's transaction.max.timeout.ms is 15m by default)", tx.Timeout)
			}
			if tx.Interval < time.Millisecond || tx.Interval*2 > tx.Timeout {
				add(key("transactions.interval"), "%s: want at least 1ms and at most half of transactions.timeout (%s)", tx.Interval, tx.Timeout)
			}
			if tx.ID != "" && !nameRE.MatchString(tx.ID) {
				add(key("transactions.id"), "%q is not a valid transactional id", tx.ID)
			}
		}
		in := &p.Instances
		switch {
		case in.Auto && p.Ordering == OrderPartition:
			add(key("instances"), "auto with ordering: partition: strict partition order runs one record at a time, so only one instance could ever be busy; use ordering: key or none to let the host size the pool, or leave instances out")
		case in.Auto && in.Min > in.Max:
			add(key("instances.min"), "%d is above the most instances: auto may choose (%d: the least of %d, host.max_instances and max_in_flight)", in.Min, in.Max, AutoMaxInstances)
		case in.Min < 1:
			add(key("instances.min"), "%d: a task needs at least one instance", in.Min)
		case in.Max < in.Min:
			add(key("instances.max"), "%d is below instances.min (%d)", in.Max, in.Min)
		case in.Max > 256:
			add(key("instances.max"), "%d: at most 256 instances per partition task", in.Max)
		case p.Ordering == OrderPartition && in.Max > 1:
			add(key("instances.max"), "%d with ordering: partition: strict partition order runs one record at a time, so only one instance could ever be busy; use ordering: key or none to run records concurrently, or instances.max: 1", in.Max)
		}
		if in.IdleTimeout < 0 {
			add(key("instances.idle_timeout"), "%s is negative", in.IdleTimeout)
		}
		if in.GrowAfter < 0 {
			add(key("instances.grow_after"), "%s is negative", in.GrowAfter)
		}
		rt := &p.Retry
		switch rt.Mode {
		case RetryTopics, RetryInline:
		default:
			add(key("retry.mode"), "%q: want topics or inline", rt.Mode)
		}
		if rt.MaxAttempts < 1 || rt.MaxAttempts > 100 {
			add(key("retry.max_attempts"), "%d: want 1 (no retries) to 100", rt.MaxAttempts)
		}
		if rt.MaxAttempts > 1 && len(rt.Backoff) == 0 {
			add(key("retry.backoff"), "retry.max_attempts is %d but there is no backoff tier: list the delays, e.g. [1s, 10s, 1m]", rt.MaxAttempts)
		}
		for j, d := range rt.Backoff {
			if d < 0 || d > 7*24*time.Hour {
				add(fmt.Sprintf("pipelines[%d].retry.backoff[%d]", i, j), "%s: want 0 to 168h", d)
			} else if j > 0 && d < rt.Backoff[j-1] {
				add(fmt.Sprintf("pipelines[%d].retry.backoff[%d]", i, j), "%s is shorter than the tier before it (%s): tiers go from short to long", d, rt.Backoff[j-1])
			}
		}
		if !validTopic(rt.TopicPrefix + ".1s") {
			add(key("retry.topic_prefix"), "%q does not make valid topic names", rt.TopicPrefix)
		}
		for j, f := range rt.RetryableFaults {
			if !slices.Contains(FaultKinds, f) {
				add(fmt.Sprintf("pipelines[%d].retry.retryable_faults[%d]", i, j), "%q: want one of %s", f, strings.Join(FaultKinds, ", "))
			}
		}
		if rt.Instances.Auto {
			add(key("retry.instances"), "auto is not supported for retry workers: give min and max")
		} else if rt.Instances.Min < 0 || rt.Instances.Max < 1 || rt.Instances.Max < rt.Instances.Min || rt.Instances.Max > 256 {
			add(key("retry.instances"), "min %d, max %d: want 0 <= min <= max, 1 <= max <= 256", rt.Instances.Min, rt.Instances.Max)
		}
		for _, t := range p.RetryTopics() {
			if inputs[t] || t == p.Output || t == p.DeadLetterTopic {
				add(key("retry.topic_prefix"), "retry topic %q is also an input, the output or the dead-letter topic", t)
			}
		}
		if p.MaxInFlight < in.Max {
			add(key("max_in_flight"), "%d is below instances.max (%d): instances beyond it could never be busy", p.MaxInFlight, in.Max)
		}
		as := &p.Async
		if as.MaxInFlight < 1 || as.MaxInFlight > 100000 {
			add(key("async.max_in_flight"), "%d: want 1 to 100000 operations per instance", as.MaxInFlight)
		}
		if as.MaxPerRecord < 1 || as.MaxPerRecord > 1024 {
			add(key("async.max_per_record"), "%d: want 1 to 1024", as.MaxPerRecord)
		}
		for j, h := range as.HTTP.AllowHosts {
			if msg := checkAllowHost(h); msg != "" {
				add(fmt.Sprintf("pipelines[%d].async.http.allow_hosts[%d]", i, j), "%q: %s", h, msg)
			}
		}
		if as.HTTP.Timeout < time.Millisecond {
			add(key("async.http.timeout"), "%s: want at least 1ms", as.HTTP.Timeout)
		}
		if as.HTTP.ConnectTimeout < time.Millisecond {
			add(key("async.http.connect_timeout"), "%s: want at least 1ms", as.HTTP.ConnectTimeout)
		}
		if as.HTTP.MaxResponseBytes < 1 || as.HTTP.MaxResponseBytes > 1<<30 {
			add(key("async.http.max_response_bytes"), "%d: want 1 to 1 GiB", as.HTTP.MaxResponseBytes)
		}
		if as.HTTP.MaxRequestBytes < 1 || as.HTTP.MaxRequestBytes > 1<<30 {
			add(key("async.http.max_request_bytes"), "%d: want 1 to 1 GiB", as.HTTP.MaxRequestBytes)
		}
		for _, k := range sortedKeys(p.Env) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				add(key("env"), "%q is not an environment variable name", k)
			}
		}
	}
	if k.CommitMetadataMaxBytes < 64 || k.CommitMetadataMaxBytes > 1<<20 {
		add("kafka.commit_metadata_max_bytes", "%d: want 64 to 1048576 (the broker's offset.metadata.max.bytes, 4096 by default)", k.CommitMetadataMaxBytes)
	}
	if c.Host.MaxInstances < 1 {
		add("host.max_instances", "%d: want at least 1", c.Host.MaxInstances)
	}
	if c.Host.MaxInstanceMemory < 64<<10 {
		add("host.max_instance_memory", "%d bytes: want at least one 64 KiB page", c.Host.MaxInstanceMemory)
	}
	if c.Host.MaxInFlight < 1 {
		add("host.max_in_flight", "%d: want at least 1", c.Host.MaxInFlight)
	}
	if c.Host.MaxAsyncInFlight < 1 {
		add("host.max_async_in_flight", "%d: want at least 1", c.Host.MaxAsyncInFlight)
	}
	for i, p := range c.Pipelines {
		// Half the bound is where records stop starting: one started just
		// below it must still be able to emit its maximum.
		if need := 2 * int64(p.Limits.MaxOutputBytes); c.Host.MaxHeldOutputBytes < need {
			add("host.max_held_output_bytes", "%d: want at least twice pipelines[%d].limits.max_output_bytes (%d)", c.Host.MaxHeldOutputBytes, i, need)
		}
	}
	switch tr := &c.Tracing; tr.Exporter {
	case "none", "stdout", "jsonl":
	case "otlp-grpc", "otlp-http":
		if _, _, err := net.SplitHostPort(tr.Endpoint); err != nil {
			add("tracing.endpoint", "%q: the %s exporter needs host:port of an OTLP receiver", tr.Endpoint, tr.Exporter)
		}
	default:
		add("tracing.exporter", "%q: want none, jsonl, stdout, otlp-grpc or otlp-http", tr.Exporter)
	}
	if r := *c.Tracing.SampleRatio; r < 0 || r > 1 {
		add("tracing.sample_ratio", "%v: want 0 to 1 (the share of healthy records traced)", r)
	}
	if l := c.Metrics.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			add("metrics.listen", "%q is not host:port", l)
		}
	}
	if e := c.Metrics.OTLP.Endpoint; e != "" {
		if _, _, err := net.SplitHostPort(e); err != nil {
			add("metrics.otlp.endpoint", "%q is not host:port", e)
		}
		if c.Metrics.Listen == "" {
			add("metrics.otlp.endpoint", "metrics are collected only with metrics.listen set (use port 0 if /metrics should not be reachable at a known port)")
		}
	}
	if c.Metrics.OTLP.Interval < time.Second {
		add("metrics.otlp.interval", "%s: want at least 1s", c.Metrics.OTLP.Interval)
	}
	if *c.Admin.Enabled {
		if _, _, err := net.SplitHostPort(c.Admin.Listen); err != nil {
			add("admin.listen", "%q is not host:port", c.Admin.Listen)
		}
		if c.Admin.MaxModuleBytes < 1024 || c.Admin.MaxModuleBytes > host.MaxModuleBytes {
			add("admin.max_module_bytes", "%d: want 1 KiB to %d (the host loads no larger module)", c.Admin.MaxModuleBytes, host.MaxModuleBytes)
		}
	}
	if c.Shutdown.DrainTimeout < 0 {
		add("shutdown.drain_timeout", "%s is negative", c.Shutdown.DrainTimeout)
	}
	if c.Status.Interval < 0 {
		add("status.interval", "%s is negative", c.Status.Interval)
	}
	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		add("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		add("log.format", "%q: want text or json", c.Log.Format)
	}
	c.checkTopology(add)
	probs = c.addNegatives(probs)
	if len(probs) == 0 {
		return nil
	}
	return probs
}

// checkAllowHost checks an async.http.allow_hosts entry: "name",
// "name:port" or "*.domain", no scheme and no path.
func checkAllowHost(h string) string {
	switch {
	case h == "":
		return "empty"
	case strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@ "):
		return "want a host name, host:port or *.domain, without scheme or path"
	case h == "*" || (strings.Contains(h, "*") && (!strings.HasPrefix(h, "*.") || strings.Count(h, "*") > 1)):
		return "a wildcard is only allowed as a leading \"*.\" (any subdomain)"
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func validTopic(t string) bool {
	return t != "." && t != ".." && len(t) <= 249 && topicRE.MatchString(t)
}

var topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// EnvPrefix is the prefix of environment variables that override config keys:
// WASMSTREAM_KAFKA_BROKERS overrides kafka.brokers.
const EnvPrefix = "WASMSTREAM_"

// reservedEnv are WASMSTREAM_ variables that are not config keys.
var reservedEnv = map[string]bool{
	"WASMSTREAM_CACHE":       true, // cache directory of the test scripts
	"WASMSTREAM_ADMIN_TOKEN": true, // admin API token
}

// Load reads the configuration: the YAML file at path (may be ""), then the
// environment (environ, KEY=VALUE), then sets ("key=value", from flags),
// each overriding the one before. It checks for unknown keys, applies
// defaults and validates.
func Load(path string, environ []string, sets []string) (*Config, error) {
	k := koanf.New(".")
	var probs Problems
	cfg := &Config{}
	if path != "" {
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		cfg.Dir = filepath.Dir(abs)
	}
	leaves := leafKeys(reflect.TypeOf(Config{}), "")
	envMap := map[string]any{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || reservedEnv[name] {
			continue
		}
		key, found := leaves[strings.ToLower(strings.TrimPrefix(name, EnvPrefix))]
		if !found {
			probs = append(probs, fmt.Sprintf("environment variable %s: matches no config key (keys inside pipelines cannot be set from the environment)", name))
			continue
		}
		envMap[key] = val
	}
	if err := k.Load(confmap.Provider(envMap, "."), nil); err != nil {
		return nil, err
	}
	setMap := map[string]any{}
	for _, s := range sets {
		key, val, ok := strings.Cut(s, "=")
		if !ok {
			probs = append(probs, fmt.Sprintf("--set %q: want key=value", s))
			continue
		}
		if _, found := leaves[strings.ReplaceAll(key, ".", "_")]; !found {
			probs = append(probs, fmt.Sprintf("--set %s: unknown key %s (keys inside pipelines cannot be set from flags)", s, key))
			continue
		}
		setMap[key] = val
	}
	if err := k.Load(confmap.Provider(setMap, "."), nil); err != nil {
		return nil, err
	}
	raw := k.Raw()
	autos := takeAutos(raw)
	if len(autos) > 0 {
		// The "auto" values are taken out (they are no numbers or sections
		// of keys) and given to the typed config after decoding.
		k = koanf.New(".")
		if err := k.Load(confmap.Provider(raw, ""), nil); err != nil {
			return nil, err
		}
	}
	probs = append(probs, unknownKeys(raw, reflect.TypeOf(Config{}), "")...)
	if len(probs) > 0 {
		return nil, probs
	}
	dc := &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
			integerHook(),
		),
		WeaklyTypedInput: true,
		TagName:          "koanf",
		Result:           cfg,
	}
	if err := k.UnmarshalWithConf("", cfg, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: dc}); err != nil {
		return nil, decodeProblems(err)
	}
	for _, a := range autos {
		if a.pipeline >= len(cfg.Pipelines) {
			continue
		}
		p := &cfg.Pipelines[a.pipeline]
		switch a.key {
		case "instances":
			p.Instances.Auto = true
		case "retry.instances":
			p.Retry.Instances.Auto = true
		case "async.max_in_flight":
			p.Async.AutoInFlight = true
		}
	}
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// autoKey is a key of a pipeline set to auto.
type autoKey struct {
	pipeline int
	key      string // "instances" (instances: auto or instances.max: auto), "retry.instances", "async.max_in_flight"
}

// takeAutos finds the keys set to auto in raw (the merged config as maps),
// removes them, and returns where they were: instances: auto becomes an
// empty instances section, instances.max: auto and async.max_in_flight:
// auto are left unset.
func takeAutos(raw map[string]any) []autoKey {
	list, _ := raw["pipelines"].([]any)
	var out []autoKey
	isAuto := func(v any) bool {
		s, ok := v.(string)
		return ok && strings.TrimSpace(s) == Auto
	}
	// section returns the section m[name], a map, or nil; an auto value
	// is replaced by an empty section and reported by auto.
	section := func(m map[string]any, name string) (sec map[string]any, auto bool) {
		if isAuto(m[name]) {
			sec = map[string]any{}
			m[name] = sec
			return sec, true
		}
		sec, _ = m[name].(map[string]any)
		return sec, false
	}
	for i, el := range list {
		p, ok := el.(map[string]any)
		if !ok {
			continue
		}
		if in, auto := section(p, "instances"); auto || (in != nil && isAuto(in["max"])) {
			delete(in, "max")
			out = append(out, autoKey{i, "instances"})
		}
		if rt, _ := p["retry"].(map[string]any); rt != nil {
			if in, auto := section(rt, "instances"); auto || (in != nil && isAuto(in["max"])) {
				delete(in, "max")
				out = append(out, autoKey{i, "retry.instances"})
			}
		}
		if as, _ := p["async"].(map[string]any); as != nil && isAuto(as["max_in_flight"]) {
			delete(as, "max_in_flight")
			out = append(out, autoKey{i, "async.max_in_flight"})
		}
	}
	return out
}

var decodeErrRE = regexp.MustCompile(`^'([^' ]+)' (.*)$`)

func decodeProblems(err error) error {
	var probs Problems
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "*"))
		if line == "" || strings.HasPrefix(line, "decoding failed due to") || strings.HasSuffix(line, "error(s) decoding:") {
			continue
		}
		if m := decodeErrRE.FindStringSubmatch(line); m != nil {
			line = m[1] + ": " + m[2] // the decoder's "'key' problem" as Validate says it
		}
		probs = append(probs, line)
	}
	if len(probs) == 0 {
		return err
	}
	return probs
}

// leafKeys maps the underscore-joined form of every settable non-list key
// ("kafka_brokers") to its dotted form ("kafka.brokers").
func leafKeys(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("koanf")
		if tag == "" || tag == "-" {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)):
			for k, v := range leafKeys(f.Type, key) {
				out[k] = v
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			// Lists of sections are set in the file only.
		default:
			out[strings.ReplaceAll(key, ".", "_")] = key
		}
	}
	return out
}

// unknownKeys walks raw (the merged config as maps) against t and names every
// key that matches no field.
func unknownKeys(raw map[string]any, t reflect.Type, prefix string) []string {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag := f.Tag.Get("koanf"); tag != "" && tag != "-" {
			fields[tag] = f.Type
		}
	}
	var out []string
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		ft, ok := fields[k]
		if !ok {
			known := make([]string, 0, len(fields))
			for f := range fields {
				known = append(known, f)
			}
			sort.Strings(known)
			out = append(out, fmt.Sprintf("%s: unknown key (known here: %s)", path, strings.Join(known, ", ")))
			continue
		}
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Duration(0)):
			if m, ok := raw[k].(map[string]any); ok {
				out = append(out, unknownKeys(m, ft, path)...)
			} else if raw[k] != nil {
				out = append(out, fmt.Sprintf("%s: want a section of keys, got %v", path, raw[k]))
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			list, ok := raw[k].([]any)
			if !ok {
				if raw[k] != nil {
					out = append(out, fmt.Sprintf("%s: want a list, got %v", path, raw[k]))
				}
				continue
			}
			for i, el := range list {
				m, ok := el.(map[string]any)
				if !ok {
					out = append(out, fmt.Sprintf("%s[%d]: want a section of keys, got %v", path, i, el))
					continue
				}
				out = append(out, unknownKeys(m, ft.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return out
}
