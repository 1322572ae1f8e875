package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/limits"
)

// Problems is every problem found in a configuration.
type Problems []string

func (p Problems) Error() string {
	if len(p) == 1 {
		return "invalid config: " + p[0]
	}
	return "invalid config:\n  - " + strings.Join(p, "\n  - ")
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// addFunc records a problem with the key it concerns: add("kafka.group",
// "a consumer group name is required").
type addFunc func(key, format string, args ...any)

// keyFunc names a key inside one pipeline: key("retry.mode") is
// "pipelines[2].retry.mode".
type keyFunc func(sub string) string

// Validate checks the configuration and returns Problems listing every
// problem, each naming its key, or nil. Each section has its own check
// below; checks across pipelines are in topology.go.
func (c *Config) Validate() error {
	var probs Problems
	add := func(key, format string, args ...any) {
		probs = append(probs, key+": "+fmt.Sprintf(format, args...))
	}
	c.checkKafka(add)
	c.checkSchemaRegistry(add)
	c.checkPipelines(add)
	c.checkHost(add)
	c.checkTracing(add)
	c.checkMetrics(add)
	c.checkAdmin(add)
	c.checkShutdownStatusLog(add)
	c.checkTopology(add)
	probs = c.addNegatives(probs)
	if len(probs) == 0 {
		return nil
	}
	return probs
}

func (c *Config) checkKafka(add addFunc) {
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
	if k.FetchMaxPartitionBytes < 1024 || k.FetchMaxPartitionBytes > 64<<20 {
		add("kafka.fetch_max_partition_bytes", "%d: want 1 KiB to 64 MiB", k.FetchMaxPartitionBytes)
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
	if k.CommitMetadataMaxBytes < 64 || k.CommitMetadataMaxBytes > 1<<20 {
		add("kafka.commit_metadata_max_bytes", "%d: want 64 to 1048576 (the broker's offset.metadata.max.bytes, 4096 by default)", k.CommitMetadataMaxBytes)
	}
	c.checkKafkaSecurity(add)
}

// checkKafkaSecurity checks kafka.tls and kafka.sasl as far as the config
// alone tells; the files they name are read (and their permissions checked)
// by internal/kafkaconn when a client is made. No message here repeats a
// secret.
func (c *Config) checkKafkaSecurity(add addFunc) {
	t, s := &c.Kafka.TLS, &c.Kafka.SASL
	embedded := c.IsEmbedded()
	if embedded && (t.Enabled || s.Mechanism != "") {
		add("kafka.tls", "the embedded broker speaks plaintext only: remove kafka.tls and kafka.sasl, or give real brokers")
	}
	checkKafkaTLS(add, t)
	checkKafkaSASL(add, s)
	if s.Mechanism == "AWS_MSK_IAM" && !t.Enabled && !embedded {
		add("kafka.tls.enabled", "AWS_MSK_IAM is served on MSK's TLS listeners only: set kafka.tls.enabled: true")
	}
}

// checkKafkaTLS checks kafka.tls on its own: no file or option without
// enabled, a certificate with its key.
func checkKafkaTLS(add addFunc, t *KafkaTLS) {
	if !t.Enabled {
		for _, kv := range [][2]string{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"server_name", t.ServerName}} {
			if kv[1] != "" {
				add("kafka.tls."+kv[0], "is set but kafka.tls.enabled is false: set enabled: true to connect with TLS")
			}
		}
		if t.InsecureSkipVerify {
			add("kafka.tls.insecure_skip_verify", "is set but kafka.tls.enabled is false")
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		add("kafka.tls.cert_file", "cert_file and key_file go together (a client certificate and its key)")
	}
}

// checkKafkaSASL checks kafka.sasl: the keys its mechanism takes, and no
// others.
func checkKafkaSASL(add addFunc, s *KafkaSASL) {
	mech := s.Mechanism
	switch mech {
	case "":
		for _, kv := range [][2]string{{"username", s.Username}, {"password", s.Password}, {"password_file", s.PasswordFile}, {"token_file", s.TokenFile}, {"region", s.Region}} {
			if kv[1] != "" {
				add("kafka.sasl."+kv[0], "is set but kafka.sasl.mechanism is not: want one of %s", strings.Join(SASLMechanisms, ", "))
			}
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		checkKafkaSASLPassword(add, s)
	case "OAUTHBEARER":
		if s.TokenFile == "" {
			add("kafka.sasl.token_file", "OAUTHBEARER needs token_file: a file holding the token, refreshed by whatever obtains it")
		}
		if s.Password != "" || s.PasswordFile != "" || s.Region != "" {
			add("kafka.sasl", "OAUTHBEARER takes token_file (and username as the authorization id), not password, password_file or region")
		}
	case "AWS_MSK_IAM":
		if s.Username != "" || s.Password != "" || s.PasswordFile != "" || s.TokenFile != "" {
			add("kafka.sasl", "AWS_MSK_IAM takes its credentials from the AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, or the shared credentials file), not username, password or token_file")
		}
	default:
		add("kafka.sasl.mechanism", "%q is not a SASL mechanism wasmstream knows: want one of %s", mech, strings.Join(SASLMechanisms, ", "))
	}
}

// checkKafkaSASLPassword checks the keys of the mechanisms of a username
// and password (PLAIN, SCRAM).
func checkKafkaSASLPassword(add addFunc, s *KafkaSASL) {
	mech := s.Mechanism
	if s.Username == "" {
		add("kafka.sasl.username", "%s needs a username", mech)
	}
	switch {
	case s.Password == "" && s.PasswordFile == "":
		add("kafka.sasl.password_file", "%s needs a password: set kafka.sasl.password_file, or the environment variable %sKAFKA_SASL_PASSWORD", mech, EnvPrefix)
	case s.Password != "" && s.PasswordFile != "":
		add("kafka.sasl.password", "both password and password_file are set: keep one")
	}
	if s.TokenFile != "" || s.Region != "" {
		add("kafka.sasl", "token_file and region are for OAUTHBEARER and AWS_MSK_IAM, not %s", mech)
	}
}

// checkPipelines checks each pipeline on its own, section by section.
func (c *Config) checkPipelines(add addFunc) {
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
		c.checkModule(add, key, p)
		c.checkVersionSource(add, key, p)
		inputs := checkTopics(add, key, p)
		if p.Group != "" && !nameRE.MatchString(p.Group) {
			add(key("group"), "%q is not a valid group name", p.Group)
		}
		checkLimits(add, key, &p.Limits)
		checkFlow(add, key, p)
		checkTransactions(add, key, p)
		checkShare(add, key, p)
		checkInstances(add, key, p)
		checkRetry(add, key, p, inputs)
		checkState(add, key, p, inputs)
		checkTimers(add, key, p)
		c.checkAsync(add, key, p)
		c.checkFormats(add, key, p)
		checkRedpanda(add, key, p)
		for _, k := range sortedKeys(p.Env) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				add(key("env"), "%q is not an environment variable name", k)
			}
		}
	}
}

func (c *Config) checkModule(add addFunc, key keyFunc, p *Pipeline) {
	path := c.ModulePath(p)
	if p.Module == "" {
		add(key("module"), "a module path is required")
	} else if st, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		add(key("module"), "%s does not exist", path)
	} else if err != nil {
		add(key("module"), "%v", errors.Unwrap(err))
	} else if st.IsDir() {
		add(key("module"), "%s is a directory, want a .wasm file", path)
	}
}

// checkTopics checks the topics a pipeline reads and writes, and returns
// its inputs as a set.
func checkTopics(add addFunc, key keyFunc, p *Pipeline) map[string]bool {
	if len(p.Inputs) == 0 {
		add(key("inputs"), "at least one input topic is required")
	}
	inputs := map[string]bool{}
	for j, t := range p.Inputs {
		if !validTopic(t) {
			add(key(fmt.Sprintf("inputs[%d]", j)), "%q is not a valid topic name", t)
		}
		if inputs[t] {
			add(key(fmt.Sprintf("inputs[%d]", j)), "%q is listed twice", t)
		}
		inputs[t] = true
	}
	const ownOutput = "%q is also an input: the pipeline would consume its own output (set allow_cycles: true if it ends the loop itself)"
	if p.Output == "" {
		add(key("output"), "an output topic is required")
	} else if !validTopic(p.Output) {
		add(key("output"), "%q is not a valid topic name", p.Output)
	} else if inputs[p.Output] && !p.AllowCycles {
		add(key("output"), ownOutput, p.Output)
	}
	for j, t := range p.AllowedOutputs {
		if !validTopic(t) {
			add(key(fmt.Sprintf("allowed_outputs[%d]", j)), "%q is not a valid topic name", t)
		} else if inputs[t] && !p.AllowCycles {
			add(key(fmt.Sprintf("allowed_outputs[%d]", j)), ownOutput, t)
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
	return inputs
}

func checkLimits(add addFunc, key keyFunc, l *Limits) {
	if l.MemoryPages < 1 || l.MemoryPages > 65536 {
		add(key("limits.memory_pages"), "%d: want 1 to 65536 pages of 64 KiB", l.MemoryPages)
	}
	if l.TableElements < 1 || l.TableElements > limits.MaxTableElements {
		add(key("limits.table_elements"), "%d: want 1 to %d table elements of 8 bytes", l.TableElements, limits.MaxTableElements)
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
}

// checkFlow checks how records flow through a pipeline: how many it holds,
// its share of the cores, its ordering and its delivery guarantee.
func checkFlow(add addFunc, key keyFunc, p *Pipeline) {
	if p.MaxInFlight < 1 || p.MaxInFlight > 1_000_000 {
		add(key("max_in_flight"), "%d: want 1 to 1000000", p.MaxInFlight)
	}
	if p.MaxInFlightBytes < 1024 || p.MaxInFlightBytes > 1<<34 {
		add(key("max_in_flight_bytes"), "%d: want 1 KiB to 16 GiB", p.MaxInFlightBytes)
	}
	if p.BatchRecords < 1 || p.BatchRecords > limits.MaxBatch {
		add(key("batch_records"), "%d: want 1 to %d records per call", p.BatchRecords, limits.MaxBatch)
	}
	if p.Weight < 1 || p.Weight > 1000 {
		add(key("weight"), "%d: want 1 to 1000", p.Weight)
	}
	switch p.Ordering {
	case OrderPartition, OrderKey, OrderNone:
	default:
		add(key("ordering"), "%q: want partition, key or none", p.Ordering)
	}
	switch p.OutputTimestamp {
	case OutputTimeNow, OutputTimeInput:
	default:
		add(key("output_timestamp"), "%q: want now or input", p.OutputTimestamp)
	}
	switch p.Guarantee {
	case AtLeastOnce, ExactlyOnce:
	default:
		add(key("guarantee"), "%q: want at_least_once or exactly_once", p.Guarantee)
	}
}

// checkShare checks consume and the share section: a share group hands
// records out one by one, so only ordering: none fits, and it has no
// transactional acknowledgement (RATIONALE.md, "Share groups").
func checkShare(add addFunc, key keyFunc, p *Pipeline) {
	switch p.Consume {
	case ConsumeGroup:
		return
	case ConsumeShare:
	default:
		add(key("consume"), "%q: want group or share", p.Consume)
		return
	}
	if p.Ordering != OrderNone {
		add(key("ordering"), "%q with consume: share: a share group hands a partition's records to several hosts at once, so only ordering: none is possible", p.Ordering)
	}
	if p.Guarantee == ExactlyOnce {
		add(key("guarantee"), "exactly_once with consume: share: share groups have no transactional acknowledgement; use guarantee: at_least_once or consume: group")
	}
	if p.Share.MaxRecords < 1 || p.Share.MaxRecords > p.MaxInFlight || p.Share.MaxRecords > 10000 {
		add(key("share.max_records"), "%d: want 1 to max_in_flight (%d), at most 10000", p.Share.MaxRecords, p.MaxInFlight)
	}
}

// checkTransactions checks the transactions section, which only
// exactly_once uses.
func checkTransactions(add addFunc, key keyFunc, p *Pipeline) {
	tx := &p.Transactions
	if p.Guarantee != ExactlyOnce {
		return
	}
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

// checkInstances checks the pool of a partition task against the
// pipeline's ordering and max_in_flight.
func checkInstances(add addFunc, key keyFunc, p *Pipeline) {
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
	if p.MaxInFlight < in.Max {
		add(key("max_in_flight"), "%d is below instances.max (%d): instances beyond it could never be busy", p.MaxInFlight, in.Max)
	}
}

// checkRetry checks the retry section; inputs are the pipeline's input
// topics, which its retry topics must differ from.
func checkRetry(add addFunc, key keyFunc, p *Pipeline, inputs map[string]bool) {
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
			add(key(fmt.Sprintf("retry.backoff[%d]", j)), "%s: want 0 to 168h", d)
		} else if j > 0 && d < rt.Backoff[j-1] {
			add(key(fmt.Sprintf("retry.backoff[%d]", j)), "%s is shorter than the tier before it (%s): tiers go from short to long", d, rt.Backoff[j-1])
		}
	}
	switch {
	case validTopic(rt.TopicPrefix + ".1s"):
	case !rt.TopicPrefixDefault:
		add(key("retry.topic_prefix"), "%q does not make valid topic names", rt.TopicPrefix)
	case len(p.RetryTopics()) > 0: // the default is used only then
		add(key("retry.topic_prefix"), "%q (the default, the pipeline's group + %q) does not make valid topic names: set retry.topic_prefix", rt.TopicPrefix, DefaultRetryTopicSuffix)
	}
	for j, f := range rt.RetryableFaults {
		if !slices.Contains(FaultKinds, f) {
			add(key(fmt.Sprintf("retry.retryable_faults[%d]", j)), "%q: want one of %s", f, strings.Join(FaultKinds, ", "))
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
}

// checkAsync checks the async section with its own checks (package
// host/asyncop's, beside each operation), and what it needs of the rest
// of the config: the schema-registry operations, a registry.
func (c *Config) checkAsync(add addFunc, key keyFunc, p *Pipeline) {
	p.Async.Check(key("async"), add)
	if p.Async.SchemaRegistry.Enabled && c.SchemaRegistry.URL == "" {
		add(key("async.schema_registry.enabled"), "true needs a schema registry: set schema_registry.url")
	}
}

func (c *Config) checkHost(add addFunc) {
	h := &c.Host
	if h.MaxInstances < 1 {
		add("host.max_instances", "%d: want at least 1", h.MaxInstances)
	}
	if h.MaxInstanceMemory < 64<<10 {
		add("host.max_instance_memory", "%d bytes: want at least one 64 KiB page", h.MaxInstanceMemory)
	}
	if h.MaxInFlight < 1 {
		add("host.max_in_flight", "%d: want at least 1", h.MaxInFlight)
	}
	if h.MaxAsyncInFlight < 1 {
		add("host.max_async_in_flight", "%d: want at least 1", h.MaxAsyncInFlight)
	}
	if h.ClockResolution < time.Nanosecond || h.ClockResolution > limits.MaxClockResolution {
		add("host.clock_resolution", "%s: want 1ns to %s", h.ClockResolution, limits.MaxClockResolution)
	}
	for i, p := range c.Pipelines {
		// Half the bound is where records stop starting: one started just
		// below it must still be able to emit its maximum.
		if need := 2 * int64(p.Limits.MaxOutputBytes); h.MaxHeldOutputBytes < need {
			add("host.max_held_output_bytes", "%d: want at least twice pipelines[%d].limits.max_output_bytes (%d)", h.MaxHeldOutputBytes, i, need)
		}
	}
}

func (c *Config) checkTracing(add addFunc) {
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
	if n := c.Tracing.MaxFileBytes; n < MinTracingMaxFileBytes {
		add("tracing.max_file_bytes", "%d: want at least %d (the size at which the jsonl file is rotated)", n, MinTracingMaxFileBytes)
	}
	if n := c.Tracing.MaxFiles; n < 1 || n > MaxTracingFiles {
		add("tracing.max_files", "%d: want 1 to %d (the rotated parts of the jsonl file kept)", n, MaxTracingFiles)
	}
}

func (c *Config) checkMetrics(add addFunc) {
	m := &c.Metrics
	if m.Listen != "" {
		if _, _, err := net.SplitHostPort(m.Listen); err != nil {
			add("metrics.listen", "%q is not host:port", m.Listen)
		}
	}
	if e := m.OTLP.Endpoint; e != "" {
		if _, _, err := net.SplitHostPort(e); err != nil {
			add("metrics.otlp.endpoint", "%q is not host:port", e)
		}
		if m.Listen == "" {
			add("metrics.otlp.endpoint", "metrics are collected only with metrics.listen set (use port 0 if /metrics should not be reachable at a known port)")
		}
	}
	if m.OTLP.Interval < time.Second {
		add("metrics.otlp.interval", "%s: want at least 1s", m.OTLP.Interval)
	}
	for i, h := range m.DashboardHosts {
		if !hostNameRE.MatchString(h) && net.ParseIP(h) == nil {
			add(fmt.Sprintf("metrics.dashboard_hosts[%d]", i), "%q: want a host name or IP address, without scheme or port", h)
		}
	}
}

var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// checkAdmin checks the admin section, only when the API is on.
func (c *Config) checkAdmin(add addFunc) {
	a := &c.Admin
	if !*a.Enabled {
		return
	}
	if _, _, err := net.SplitHostPort(a.Listen); err != nil {
		add("admin.listen", "%q is not host:port", a.Listen)
	}
	if a.MaxModuleBytes < 1024 || a.MaxModuleBytes > limits.MaxModuleBytes {
		add("admin.max_module_bytes", "%d: want 1 KiB to %d (the host loads no larger module)", a.MaxModuleBytes, limits.MaxModuleBytes)
	}
}

func (c *Config) checkShutdownStatusLog(add addFunc) {
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

// checkTimers checks the timers section: idle_advance is off (0) or at
// least MinIdleAdvance (each partition checks that often), and needs the
// state where timers are kept.
func checkTimers(add addFunc, key keyFunc, p *Pipeline) {
	d := p.Timers.IdleAdvance
	switch {
	case d == 0:
	case d < MinIdleAdvance:
		add(key("timers.idle_advance"), "%s: want 0 (off) or at least %s", d, MinIdleAdvance)
	case !p.State.Enabled:
		add(key("timers.idle_advance"), "%s without state.enabled: timers are kept in the partition's state", d)
	}
}

// checkState checks the state section: per-key state is serialised by the
// ordering and lives with one input partition, so it needs partition or key
// order, one input topic, no retry topics (a retried record would update
// its keys out of order, on another pipeline) and a consumer group
// (RATIONALE.md, "State stores").
func checkState(add addFunc, key keyFunc, p *Pipeline, inputs map[string]bool) {
	st := &p.State
	if !st.Enabled {
		return
	}
	if p.Ordering == OrderNone {
		add(key("ordering"), "none with state.enabled: updates to one key must be serialised; use ordering: partition or key")
	}
	if len(p.Inputs) > 1 {
		add(key("inputs"), "%d topics with state.enabled: a state store belongs to one input partition, so a stateful pipeline reads one topic", len(p.Inputs))
	}
	if p.Consume == ConsumeShare {
		add(key("consume"), "share with state.enabled: a share group gives no host a partition of its own; use consume: group")
	}
	if len(p.RetryTopics()) > 0 {
		add(key("retry.mode"), "topics with state.enabled: a record retried through a retry topic would update its keys after later records of the same key; use retry.mode: inline or retry.max_attempts: 1")
	}
	if st.MaxValueBytes < 1 || st.MaxValueBytes > 512<<10 {
		add(key("state.max_value_bytes"), "%d: want 1 to 524288 (a changelog record must fit a produce, 1 MB by default, with its key)", st.MaxValueBytes)
	}
	if need := int64(st.MaxValueBytes) + abi.MaxStateKeyBytes; st.MaxBytes < need {
		add(key("state.max_bytes"), "%d: want at least state.max_value_bytes plus a key's 1024 bytes (%d), so that one entry fits", st.MaxBytes, need)
	}
	if !validTopic(st.Changelog) {
		add(key("state.changelog"), "%q is not a valid topic name", st.Changelog)
	} else if inputs[st.Changelog] || st.Changelog == p.Output || st.Changelog == p.DeadLetterTopic || slices.Contains(p.AllowedOutputs, st.Changelog) {
		add(key("state.changelog"), "%q must be a topic of its own, not an input or output of the pipeline", st.Changelog)
	}
	if st.RestoreTimeout < time.Second {
		add(key("state.restore_timeout"), "%s is below the minimum of 1s", st.RestoreTimeout)
	}
}
