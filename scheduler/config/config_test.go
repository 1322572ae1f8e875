package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.wasm"), []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const good = `
kafka:
  brokers: [embedded]
  group: wasmstream-demo
pipelines:
  - name: uppercase
    module: m.wasm
    inputs: [demo-in]
    output: demo-out
    dead_letter_topic: demo-in.dlq
    limits:
      memory_pages: 512
      record_timeout: 2s
`

func TestLoadGood(t *testing.T) {
	c, err := Load(write(t, good), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Pipelines[0]
	if !c.IsEmbedded() || p.Limits.RecordTimeout != 2*time.Second || p.Limits.MemoryPages != 512 || c.GroupID(p) != "wasmstream-demo.uppercase" {
		t.Fatalf("%+v", c)
	}
	if c.Kafka.CommitInterval != time.Second || p.MaxInFlight != 10000 || p.Ordering != "partition" || p.Instances.Min != 1 || p.Instances.Max != 1 || c.Kafka.StartOffset != "earliest" {
		t.Fatalf("defaults not applied: %+v", c.Kafka)
	}
	if filepath.Dir(c.ModulePath(p)) != c.Dir {
		t.Fatalf("module path %s not relative to the config's directory %s", c.ModulePath(p), c.Dir)
	}
}

func TestOverrides(t *testing.T) {
	env := []string{"WASMSTREAM_KAFKA_BROKERS=127.0.0.1:9092,127.0.0.1:9093", "WASMSTREAM_KAFKA_GROUP=from-env", "WASMSTREAM_CACHE=/tmp/x", "PATH=/bin"}
	c, err := Load(write(t, good), env, []string{"kafka.group=from-flag", "kafka.commit_interval=250ms"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Kafka.Brokers, " ") != "127.0.0.1:9092 127.0.0.1:9093" {
		t.Fatalf("env did not override brokers: %v", c.Kafka.Brokers)
	}
	if c.Kafka.Group != "from-flag" || c.Kafka.CommitInterval != 250*time.Millisecond {
		t.Fatalf("flags did not override: %+v", c.Kafka)
	}
}

func TestProblemsNameTheirKeys(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env, sets  []string
		want       []string
	}{
		{"unknown keys", good + "\nextra: 1\n", nil, nil, []string{"extra: unknown key"}},
		{"unknown nested", strings.Replace(good, "record_timeout: 2s", "record_timeout: 2s\n      memory_page: 3", 1), nil, nil, []string{"pipelines[0].limits.memory_page: unknown key"}},
		{"unknown env", good, []string{"WASMSTREAM_KAFKA_BROKER=x:1"}, nil, []string{"environment variable WASMSTREAM_KAFKA_BROKER: matches no config key"}},
		{"unknown flag", good, nil, []string{"kafka.grup=x"}, []string{"--set kafka.grup: unknown key", "did you mean kafka.group?"}},
		{"bad duration", strings.Replace(good, "2s", "two seconds", 1), nil, nil, []string{"pipelines[0].limits.record_timeout"}},
		{"bad number", strings.Replace(good, "512", "lots", 1), nil, nil, []string{"pipelines[0].limits.memory_pages"}},
		{"everything missing", "pipelines:\n  - name: 'bad name!'\n", nil, nil, []string{
			"kafka.brokers: at least one broker", "kafka.group: a consumer group name is required",
			`pipelines[0].name: "bad name!"`, "pipelines[0].module: a module path is required",
			"pipelines[0].inputs: at least one input topic", "pipelines[0].output: an output topic is required",
			"pipelines[0].dead_letter_topic: a dead-letter topic is required"}},
		{"incoherent", strings.NewReplacer("brokers: [embedded]", "brokers: [embedded, 'k:9092']", "output: demo-out", "output: demo-in", "m.wasm", "missing.wasm").Replace(good), nil, nil, []string{
			"kafka.brokers[0]: \"embedded\" starts an in-process broker and cannot be combined",
			"pipelines[0].output: \"demo-in\" is also an input", "pipelines[0].module:", "does not exist"}},
		{"limits", strings.NewReplacer("memory_pages: 512", "memory_pages: 70000", "record_timeout: 2s", "record_timeout: 0s\n      max_output_bytes: 10").Replace(good), nil, nil, []string{
			"pipelines[0].limits.memory_pages: 70000", "pipelines[0].limits.max_output_bytes: 10"}},
		{"duplicate pipelines", good + strings.Join(strings.Split(good, "\n")[5:], "\n"), nil, nil, []string{`pipelines[1].name: "uppercase" is also the name of pipelines[0]`}},
		{"log", good + "log:\n  level: loud\n", nil, nil, []string{`log.level: "loud"`}},
		{"fetch wait", good, nil, []string{"kafka.fetch_max_wait=1m"}, []string{"kafka.fetch_max_wait: 1m0s: want 1ms to 30s"}},
		{"dashboard hosts", good, nil, []string{"metrics.dashboard_hosts=dash.internal,http://x,a b"}, []string{`metrics.dashboard_hosts[1]: "http://x": want a host name`, `metrics.dashboard_hosts[2]: "a b"`}},
		{"clock too coarse", good, nil, []string{"host.clock_resolution=2s"}, []string{"host.clock_resolution: 2s: want 1ns to 1s"}},
		{"clock negative", good, nil, []string{"host.clock_resolution=-1ms"}, []string{"host.clock_resolution: -1ms: want 1ns to 1s"}},
		{"partition order with a pool", strings.Replace(good, "limits:", "instances: {max: 4}\n    limits:", 1), nil, nil, []string{"pipelines[0].instances.max: 4 with ordering: partition: strict partition order runs one record at a time"}},
		{"pool bounds", strings.Replace(good, "limits:", "ordering: sideways\n    instances: {min: 3, max: 2}\n    limits:", 1), nil, nil, []string{`pipelines[0].ordering: "sideways"`, "pipelines[0].instances.max: 2 is below instances.min (3)"}},
		{"async", strings.Replace(good, "limits:", "async:\n      max_in_flight: -1\n      http: {allow_hosts: ['http://x.internal/path', '*', 'a.*.b', ''], timeout: 0s, max_response_bytes: -5}\n    env: {'A=B': x}\n    limits:", 1), nil, []string{"host.max_async_in_flight=-1"}, []string{
			"pipelines[0].async.max_in_flight: -1: want 1 to 100000",
			`pipelines[0].async.http.allow_hosts[0]: "http://x.internal/path": want a host name, host:port or *.domain, without scheme or path`,
			`pipelines[0].async.http.allow_hosts[1]: "*": a wildcard is only allowed as a leading "*."`,
			`pipelines[0].async.http.allow_hosts[2]: "a.*.b"`, `pipelines[0].async.http.allow_hosts[3]: "": empty`,
			"pipelines[0].async.http.max_response_bytes: -5", `pipelines[0].env: "A=B" is not an environment variable name`,
			"host.max_async_in_flight: -1"}},
		{"exactly once", strings.Replace(good, "limits:", "guarantee: twice\n    limits:", 1), nil, nil, []string{`pipelines[0].guarantee: "twice": want at_least_once or exactly_once`}},
		{"transactions", strings.Replace(good, "limits:", "guarantee: exactly_once\n    transactions: {max_records: 0, interval: 40s, timeout: 1m, id: 'a b'}\n    limits:", 1), nil, nil, []string{
			"pipelines[0].transactions.interval: 40s: want at least 1ms and at most half of transactions.timeout (1m0s)",
			`pipelines[0].transactions.id: "a b" is not a valid transactional id`}},
		{"transaction timeout", strings.Replace(good, "limits:", "guarantee: exactly_once\n    transactions: {max_records: -3, timeout: 20m}\n    limits:", 1), nil, nil, []string{
			"pipelines[0].transactions.max_records: -3: want 1 to 1000000", "pipelines[0].transactions.timeout: 20m0s: want 1s to 15m"}},
		{"in flight below pool", strings.Replace(good, "limits:", "ordering: key\n    instances: {max: 8}\n    max_in_flight: 4\n    limits:", 1), nil, nil, []string{"pipelines[0].max_in_flight: 4 is below instances.max (8)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.yaml), tc.env, tc.sets)
			if err == nil {
				t.Fatal("loaded an invalid config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestReferenceConfig(t *testing.T) {
	// The repository's commented config.yaml must load as it is (its module
	// is built by the demo; here only its existence is faked).
	root, _ := filepath.Abs("../..")
	b, err := os.ReadFile(filepath.Join(root, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, mod := range []string{"plugins/examples/uppercase/uppercase.wasm", "plugins/examples/enrich/enrich.wasm", "plugins/examples/lookup/lookup.wasm"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(mod)), 0o755)
		os.WriteFile(filepath.Join(dir, mod), []byte("\x00asm"), 0o644)
	}
	p := filepath.Join(dir, "config.yaml")
	os.WriteFile(p, b, 0o644)
	if _, err := Load(p, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRetryConfig(t *testing.T) {
	c, err := Load(write(t, good), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Pipelines[0]
	if got := strings.Join(p.RetryTopics(), ","); got != "wasmstream-demo.uppercase.retry.1s,wasmstream-demo.uppercase.retry.10s,wasmstream-demo.uppercase.retry.1m" {
		t.Fatalf("default retry topics %s", got)
	}
	for attempt, want := range map[int]time.Duration{2: time.Second, 3: 10 * time.Second, 4: time.Minute, 9: time.Minute} {
		if d, _ := p.Delay(attempt); d != want {
			t.Fatalf("attempt %d waits %v, want %v", attempt, d, want)
		}
	}
	bad := strings.Replace(good, "limits:", "retry: {mode: later, max_attempts: 3, backoff: [10s, 1s], retryable_faults: [hiccup], topic_prefix: demo-out}\n    limits:", 1)
	_, err = Load(write(t, bad), nil, nil)
	for _, want := range []string{`pipelines[0].retry.mode: "later"`, "pipelines[0].retry.backoff[1]: 1s is shorter than the tier before it", `pipelines[0].retry.retryable_faults[0]: "hiccup"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	noTiers := strings.Replace(good, "limits:", "retry: {max_attempts: 3, backoff: []}\n    limits:", 1)
	if _, err := Load(write(t, noTiers), nil, nil); err == nil || !strings.Contains(err.Error(), "pipelines[0].retry.backoff: retry.max_attempts is 3 but there is no backoff tier") {
		t.Errorf("no tiers: %v", err)
	}
	if c, err := Load(write(t, strings.Replace(good, "limits:", "retry: {max_attempts: 1}\n    limits:", 1)), nil, nil); err != nil || len(c.Pipelines[0].RetryTopics()) != 0 {
		t.Errorf("max_attempts 1 needs no retry topics: %v", err)
	}
}

// retry.topic_prefix defaults to the pipeline's consumer group + ".retry"
// (its own group key, or kafka.group + "." + its name), so that two
// applications with pipelines of one name keep apart; a prefix that is set
// is kept, and only a default one is marked as such (the host then checks
// the old default's topics, OldDefaultRetryTopics).
func TestRetryTopicPrefixDefault(t *testing.T) {
	for _, tc := range []struct {
		name, keys   string
		prefix       string
		def          bool
		old, retries string
	}{
		{"kafka.group", "", "wasmstream-demo.uppercase.retry", true, "uppercase.retry.1s,uppercase.retry.10s,uppercase.retry.1m", "wasmstream-demo.uppercase.retry.1s"},
		{"pipeline group", "group: app-a", "app-a.retry", true, "uppercase.retry.1s,uppercase.retry.10s,uppercase.retry.1m", "app-a.retry.1s"},
		{"explicit", "retry: {topic_prefix: uppercase.retry}", "uppercase.retry", false, "", "uppercase.retry.1s"},
		{"explicit, the new default's value", "retry: {topic_prefix: wasmstream-demo.uppercase.retry}", "wasmstream-demo.uppercase.retry", false, "", "wasmstream-demo.uppercase.retry.1s"},
		{"old default is the new", "group: uppercase", "uppercase.retry", true, "", "uppercase.retry.1s"},
		{"no retry topics", "retry: {mode: inline}", "wasmstream-demo.uppercase.retry", true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(t, strings.Replace(good, "limits:", tc.keys+"\n    limits:", 1)), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := &c.Pipelines[0]
			if p.Retry.TopicPrefix != tc.prefix || p.Retry.TopicPrefixDefault != tc.def {
				t.Fatalf("retry.topic_prefix %q (default %v), want %q (%v)", p.Retry.TopicPrefix, p.Retry.TopicPrefixDefault, tc.prefix, tc.def)
			}
			if got := strings.Join(p.OldDefaultRetryTopics(), ","); got != tc.old {
				t.Fatalf("old default's retry topics %q, want %q", got, tc.old)
			}
			if got := p.RetryTopics(); (tc.retries == "") != (len(got) == 0) || (len(got) > 0 && got[0] != tc.retries) {
				t.Fatalf("retry topics %q, want the first %q", got, tc.retries)
			}
		})
	}
	// A kafka.group that makes no valid topic name: the default prefix is
	// refused only where retry topics are used, and the error says to set it.
	spaced := strings.Replace(good, "group: wasmstream-demo", "group: wasmstream demo", 1)
	if _, err := Load(write(t, spaced), nil, nil); err == nil || !strings.Contains(err.Error(), `pipelines[0].retry.topic_prefix: "wasmstream demo.uppercase.retry" (the default, the pipeline's group + ".retry") does not make valid topic names: set retry.topic_prefix`) {
		t.Errorf("group that makes no topic name: %v", err)
	}
}

// Integer keys take whole numbers that fit their type, from the file, the
// environment and flags alike; nothing wraps, truncates or reads true as 1.
func TestIntegerKeysStrict(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env, sets  []string
		want       []string
	}{
		{"wraps", strings.Replace(good, "memory_pages: 512", "memory_pages: 4294967297", 1), nil, nil, []string{"pipelines[0].limits.memory_pages: 4294967297 is too large: want at most 4294967295"}},
		{"truncates", strings.Replace(good, "record_timeout: 2s", "record_timeout: 2s\n      max_outputs: 2.9", 1), nil, nil, []string{"pipelines[0].limits.max_outputs: 2.9 is not a whole number"}},
		{"bool", strings.Replace(good, "record_timeout: 2s", "record_timeout: 2s\n      max_outputs: true", 1), nil, nil, []string{"pipelines[0].limits.max_outputs: true is not a number"}},
		{"negative unsigned", strings.Replace(good, "memory_pages: 512", "memory_pages: -1", 1), nil, nil, []string{"pipelines[0].limits.memory_pages: -1 is negative: want 0 to 4294967295"}},
		{"huge float", strings.Replace(good, "memory_pages: 512", "memory_pages: 1e30", 1), nil, nil, []string{"pipelines[0].limits.memory_pages: 1e+30 is too large"}},
		{"int32", good, []string{"WASMSTREAM_KAFKA_TOPIC_PARTITIONS=4294967300"}, nil, []string{"kafka.topic_partitions: 4294967300 is too large: want at most 2147483647"}},
		{"env fraction", good, []string{"WASMSTREAM_HOST_MAX_INSTANCES=2.5"}, nil, []string{"host.max_instances: 2.5 is not a whole number"}},
		{"flag overflow", good, nil, []string{"host.max_in_flight=99999999999999999999"}, []string{"host.max_in_flight: 99999999999999999999 is too large"}},
		{"unused but negative", good + "admin:\n  enabled: false\n  max_module_bytes: -1\n", nil, []string{"kafka.embedded_port=-2"}, []string{
			"admin.max_module_bytes: -1 is negative: want 0 or more", "kafka.embedded_port: -2 is not a port"}},
		{"at_least_once transactions", strings.Replace(good, "limits:", "transactions: {max_records: -4}\n    limits:", 1), nil, nil, []string{"pipelines[0].transactions.max_records: -4 is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.yaml), tc.env, tc.sets)
			if err == nil {
				t.Fatal("loaded an invalid config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if strings.Count(err.Error(), "kafka.embedded_port") > 1 {
				t.Errorf("a key is named twice:\n%v", err)
			}
		})
	}
	// Whole numbers written as floats, strings of digits and durations as
	// before are fine.
	c, err := Load(write(t, strings.Replace(good, "memory_pages: 512", "memory_pages: 1e3\n      max_outputs: 7.0", 1)), []string{"WASMSTREAM_HOST_MAX_INSTANCES=12"}, []string{"kafka.topic_partitions=0x10"})
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Pipelines[0].Limits; l.MemoryPages != 1000 || l.MaxOutputs != 7 || l.RecordTimeout != 2*time.Second || c.Host.MaxInstances != 12 || c.Kafka.TopicPartitions != 16 {
		t.Fatalf("decoded %+v, max_instances %d, topic_partitions %d", l, c.Host.MaxInstances, c.Kafka.TopicPartitions)
	}
}

// pipelinesYAML is a config with one pipeline per spec: "name: in -> out",
// then any further keys of it, each after a ";" (its dead-letter topic is
// name.dlq unless one is given).
func pipelinesYAML(specs ...string) string {
	var b strings.Builder
	b.WriteString("kafka:\n  brokers: [embedded]\n  group: g\npipelines:\n")
	for _, s := range specs {
		head, extra, _ := strings.Cut(s, ";")
		name, flow, _ := strings.Cut(head, ":")
		in, out, _ := strings.Cut(flow, "->")
		name, in, out = strings.TrimSpace(name), strings.TrimSpace(in), strings.TrimSpace(out)
		fmt.Fprintf(&b, "  - name: %s\n    module: m.wasm\n    inputs: [%s]\n    output: %s\n", name, in, out)
		if !strings.Contains(extra, "dead_letter_topic:") {
			fmt.Fprintf(&b, "    dead_letter_topic: %s.dlq\n", name)
		}
		for _, l := range strings.Split(extra, ";") {
			if l = strings.TrimSpace(l); l != "" {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	return b.String()
}

// Pipelines that feed each other in a cycle are refused unless one of the
// cycle allows it.
func TestCyclesRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []string
		want  string // "" = loads
	}{
		{"two", []string{"a: x -> y", "b: y -> x"}, `pipelines[0].output: "y" feeds a cycle of pipelines: a -[y]-> b -[x]-> a; a record could go round forever`},
		{"three through allowed_outputs", []string{"a: x -> y", "b: y -> z; allowed_outputs: [w]", "c: w -> x"}, `pipelines[0].output: "y" feeds a cycle of pipelines: a -[y]-> b -[w]-> c -[x]-> a`},
		{"through a dead-letter topic", []string{"a: x -> y", "redrive: a.dlq -> x"}, `pipelines[0].dead_letter_topic: "a.dlq" feeds a cycle of pipelines: a -[a.dlq]-> redrive -[x]-> a`},
		{"own output", []string{"a: x -> x"}, `pipelines[0].output: "x" is also an input: the pipeline would consume its own output (set allow_cycles: true`},
		{"own allowed output", []string{"a: x -> y; allowed_outputs: [x]"}, `pipelines[0].allowed_outputs[0]: "x" is also an input`},
		{"one cycle allowed, another not", []string{"a: x -> y; allow_cycles: true", "b: y -> x", "c: y -> z", "d: z -> y"}, `pipelines[2].output: "z" feeds a cycle of pipelines: c -[z]-> d -[y]-> c`},
		{"allowed", []string{"a: x -> y", "b: y -> x; allow_cycles: true"}, ""},
		{"own output allowed", []string{"a: x -> x; allow_cycles: true"}, ""},
		{"no cycle", []string{"a: x -> y", "b: y -> z", "c: x -> z", "dlq-reader: a.dlq -> audit"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, pipelinesYAML(tc.specs...)), nil, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error does not contain %q:\n%v", tc.want, err)
			case err != nil && strings.Count(err.Error(), "\n") > 0:
				t.Fatalf("more than one problem:\n%v", err)
			}
		})
	}
}

// Retry topics, consumer groups and transactional ids belong to one
// pipeline; dead-letter topics may be shared and read.
func TestSharedInternalsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []string
		want  string // "" = loads
	}{
		{"retry prefix", []string{"a: x -> y; retry: {topic_prefix: shared}", "b: z -> w; retry: {topic_prefix: shared}"}, `pipelines[1].retry.topic_prefix: retry topic "shared.1s" is also a retry topic of pipelines[0] (a): each pipeline needs retry topics of its own`},
		{"another's retry topic as input", []string{"a: x -> y", "b: g.a.retry.10s -> w"}, `pipelines[1].inputs[0]: "g.a.retry.10s" is a retry topic of pipelines[0] (a)`},
		{"another's retry topic as output", []string{"a: x -> y", "b: z -> g.a.retry.1m"}, `pipelines[1].output: "g.a.retry.1m" is a retry topic of pipelines[0] (a)`},
		{"own retry topic as allowed output", []string{"a: x -> y; allowed_outputs: [g.a.retry.1s]"}, `pipelines[0].allowed_outputs[0]: "g.a.retry.1s" is a retry topic of pipelines[0] (a)`},
		{"another's retry topic by its group", []string{"a: x -> y; group: app-a", "b: app-a.retry.1s -> w"}, `pipelines[1].inputs[0]: "app-a.retry.1s" is a retry topic of pipelines[0] (a)`},
		{"the old default's names are free", []string{"a: x -> y", "b: a.retry.10s -> w"}, ""},
		{"group", []string{"a: x -> y; group: same", "b: z -> w; group: same"}, `pipelines[1].group: consumer group "same" is also used by pipelines[0] (a)`},
		{"retry workers' group", []string{"a: x -> y", "b: z -> w; group: g.a.retry"}, `pipelines[1].group: consumer group "g.a.retry" is also used by pipelines[0] (a)`},
		{"transactional id", []string{"a: x -> y; guarantee: exactly_once; transactions: {id: tx}", "b: z -> w; guarantee: exactly_once; transactions: {id: tx}"}, `pipelines[1].transactions.id: transactional id "tx" is also used by pipelines[0] (a)`},
		{"shared and read dead-letter topic", []string{"a: x -> y; dead_letter_topic: dlq", "b: z -> w; dead_letter_topic: dlq", "c: dlq -> audit"}, ""},
		{"no retry topics, no retry group", []string{"a: x -> y; retry: {max_attempts: 1}", "b: z -> w; group: g.a.retry"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, pipelinesYAML(tc.specs...)), nil, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error does not contain %q:\n%v", tc.want, err)
			}
		})
	}
}

// Load never panics or hangs, whatever the file holds: it returns a valid
// config or an error.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(pipelinesYAML("a: x -> y", "b: y -> x")))
	f.Add([]byte(pipelinesYAML("a: x -> y; retry: {topic_prefix: s, backoff: [1s, 1h]}", "b: y -> z; allowed_outputs: [x]; allow_cycles: true")))
	f.Add([]byte(strings.Replace(good, "512", "4294967297", 1)))
	f.Add([]byte("a: &a [*a, *a]\nb: [*a, *a, *a]\n"))
	f.Add([]byte("pipelines: {x: 1}\nkafka: 3\n"))
	f.Add([]byte("pipelines:\n  - limits: {memory_pages: .nan, max_outputs: -.inf}\n    retry: {backoff: [-1s]}\n"))
	if b, err := os.ReadFile("../../config.yaml"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, yaml []byte) {
		c, err := Load(write(t, string(yaml)), nil, nil)
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Load returned a config that does not validate: %v", verr)
			}
			if len(c.Pipelines) == 0 {
				t.Fatal("Load returned a config without pipelines")
			}
		}
	})
}

func TestGrowAfter(t *testing.T) {
	c, err := Load(write(t, strings.Replace(good, "limits:", "ordering: none\n    instances: {max: 4, grow_after: 5ms}\n    limits:", 1)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Pipelines[0].Instances.GrowAfter; g != 5*time.Millisecond {
		t.Fatalf("grow_after %s", g)
	}
	if g := c.Pipelines[0].Retry.Instances.GrowAfter; g != DefaultGrowAfter {
		t.Fatalf("retry workers' grow_after %s, want the default", g)
	}
	c, err = Load(write(t, good), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Pipelines[0].Instances.GrowAfter; g != DefaultGrowAfter {
		t.Fatalf("default grow_after %s", g)
	}
	_, err = Load(write(t, strings.Replace(good, "limits:", "ordering: none\n    instances: {max: 4, grow_after: -1s}\n    limits:", 1)), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].instances.grow_after: -1s is negative") {
		t.Fatalf("got %v", err)
	}
}

func TestAuto(t *testing.T) {
	with := func(keys string) string { return strings.Replace(good, "limits:", keys+"\n    limits:", 1) }
	for _, keys := range []string{"ordering: none\n    instances: auto", "ordering: key\n    instances: {max: auto, idle_timeout: 5s}"} {
		c, err := Load(write(t, with(keys)), nil, nil)
		if err != nil {
			t.Fatalf("%q: %v", keys, err)
		}
		in := c.Pipelines[0].Instances
		if !in.Auto || in.Min != 1 || in.Max != AutoMaxInstances || in.GrowAfter != DefaultGrowAfter {
			t.Fatalf("%q: %+v", keys, in)
		}
	}
	// Bounded by the host's budget.
	c, err := Load(write(t, with("ordering: none\n    instances: {min: 2, max: auto}")+"host: {max_instances: 6}\n"), nil, nil)
	if err != nil || c.Pipelines[0].Instances.Max != 6 || c.Pipelines[0].Instances.Min != 2 {
		t.Fatalf("%v %+v", err, c)
	}
	// Refused with ordering: partition (the default), naming the key.
	_, err = Load(write(t, with("instances: auto")), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].instances: auto with ordering: partition") {
		t.Fatalf("got %v", err)
	}
	_, err = Load(write(t, with("ordering: none\n    instances: {min: 9, max: auto}")+"host: {max_instances: 6}\n"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].instances.min: 9 is above") {
		t.Fatalf("got %v", err)
	}
	_, err = Load(write(t, with("retry: {instances: auto}")), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].retry.instances: auto is not supported") {
		t.Fatalf("got %v", err)
	}
	_, err = Load(write(t, with("ordering: none\n    instances: automatic")), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].instances: want a section of keys") {
		t.Fatalf("got %v", err)
	}
	// async.max_in_flight: auto.
	c, err = Load(write(t, with("async: {max_in_flight: auto}")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Pipelines[0].Async; !a.AutoInFlight || a.MaxInFlight != AutoAsyncMaxInFlight {
		t.Fatalf("%+v", a)
	}
	c, err = Load(write(t, good), nil, nil)
	if err != nil || c.Pipelines[0].Async.AutoInFlight || c.Pipelines[0].Instances.Auto {
		t.Fatalf("%v: auto by default", err)
	}
	_, err = Load(write(t, with("async: {max_in_flight: fast}")), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pipelines[0].async.max_in_flight") {
		t.Fatalf("got %v", err)
	}
}

// host.compile_cache_dir: auto by default, under the user's cache
// directory; none keeps compiled code in memory; a relative directory is the
// config file's.
func TestCompileCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/var/cache/someone")
	p := write(t, good)
	for _, tc := range []struct {
		set  []string
		dir  string
		auto bool
	}{
		{nil, "/var/cache/someone/wasmstream/compiled", true},
		{[]string{"host.compile_cache_dir=none"}, "", false},
		{[]string{"host.compile_cache_dir=/srv/ws"}, "/srv/ws", false},
		{[]string{"host.compile_cache_dir=cc"}, filepath.Join(filepath.Dir(p), "cc"), false},
	} {
		c, err := Load(p, nil, tc.set)
		if err != nil {
			t.Fatal(err)
		}
		dir, auto, err := c.CompileCacheDir()
		if err != nil || dir != tc.dir || auto != tc.auto {
			t.Errorf("%v: %q auto %v err %v, want %q auto %v", tc.set, dir, auto, err, tc.dir, tc.auto)
		}
	}
}
