package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withSchema is good with a registry and a pipeline that decodes its
// input values and encodes its output values.
const withSchema = `
kafka:
  brokers: [embedded]
  group: wasmstream-demo
schema_registry:
  url: http://registry.example:8081
pipelines:
  - name: uppercase
    module: m.wasm
    inputs: [demo-in]
    output: demo-out
    dead_letter_topic: demo-in.dlq
    input_format:
      value: {format: confluent}
    output_format:
      value: {format: confluent}
`

// TestSchemaFormatsLoad: output stays a topic name (configs from before
// the formats load unchanged, raw everywhere); the formats are keys of
// their own with their defaults (defaults.go), and the subject follows
// the strategy.
func TestSchemaFormatsLoad(t *testing.T) {
	c, err := Load(write(t, good), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Pipelines[0]
	if p.Output != "demo-out" || p.UsesSchemaRegistry() || p.InputFormat.Value.Format != FormatRaw || p.OutputFormat.Key.Format != FormatRaw {
		t.Fatalf("a config without formats: %+v %+v", p.InputFormat, p.OutputFormat)
	}
	c, err = Load(write(t, withSchema), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p = &c.Pipelines[0]
	ov := p.OutputFormat.Value
	if !p.UsesSchemaRegistry() || !p.InputFormat.Value.Confluent() || p.InputFormat.Key.Confluent() || !ov.Confluent() ||
		ov.VersionNumber() != -1 || ov.SubjectFor(p.Output, "value") != "demo-out-value" || p.InputFormat.MaxJSONBytes != 1<<20 {
		t.Fatalf("formats: %+v %+v", p.InputFormat, p.OutputFormat)
	}
	if r := c.SchemaRegistry; r.RequestTimeout != 10*time.Second || r.RefreshPeriod != 5*time.Minute || r.Cache.MaxSchemas != 1000 {
		t.Fatalf("registry defaults: %+v", r)
	}
	// A schema file: its type by extension, its path beside the config.
	c, err = Load(write(t, outValue("{format: confluent, schema_file: schemas/order.AVSC, auto_register: true}")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ov = c.Pipelines[0].OutputFormat.Value
	if !ov.AutoRegister || ov.SchemaFileType() != "AVRO" || c.SchemaFilePath(ov) != filepath.Join(c.Dir, "schemas/order.AVSC") {
		t.Fatalf("schema file: %+v, path %s", ov, c.SchemaFilePath(ov))
	}
	for _, tc := range []struct {
		o    OutputPart
		want string
	}{
		{OutputPart{SubjectStrategy: StrategyRecord, Record: "com.example.Order"}, "com.example.Order"},
		{OutputPart{SubjectStrategy: StrategyTopicRecord, Record: "com.example.Order"}, "demo-out-com.example.Order"},
		{OutputPart{SubjectStrategy: StrategyTopicRecord, Subject: "fixed"}, "fixed"},
	} {
		if got := tc.o.SubjectFor("demo-out", "value"); got != tc.want {
			t.Errorf("%+v: subject %q, want %q", tc.o, got, tc.want)
		}
	}
}

// outValue is withSchema with output_format.value set to v.
func outValue(v string) string {
	return strings.TrimSuffix(withSchema, "      value: {format: confluent}\n") + "      value: " + v + "\n"
}

// TestSchemaConfigBadKeysNamed: every bad key of schema_registry,
// input_format and output_format is named.
func TestSchemaConfigBadKeysNamed(t *testing.T) {
	noURL := strings.Replace(withSchema, "schema_registry:\n  url: http://registry.example:8081\n", "", 1)
	for _, tc := range []struct {
		name string
		yaml string
		sets []string
		want []string
	}{
		{"confluent without a registry", noURL, nil, []string{
			"pipelines[0].input_format.value.format: confluent needs a schema registry: set schema_registry.url",
			"pipelines[0].output_format.value.format: confluent needs a schema registry"}},
		{"unknown format", withSchema, nil, nil},
		{"unknown strategy", outValue("{format: confluent, subject_strategy: topicname}"), nil,
			[]string{`pipelines[0].output_format.value.subject_strategy: "topicname": want topic, record or topic_record`}},
		{"record strategy without a record", outValue("{format: confluent, subject_strategy: record}"), nil,
			[]string{"pipelines[0].output_format.value.record: subject_strategy record names the subject after the record"}},
		{"bad version", outValue("{format: confluent, version: newest}"), nil,
			[]string{`pipelines[0].output_format.value.version: "newest": want latest or a version number`}},
		{"subject on a raw output", outValue("{format: confluent}\n      key: {subject: k}"), nil,
			[]string{"pipelines[0].output_format.key.subject: is set but format is raw"}},
		{"topic strategy without an output", strings.Replace(withSchema, "    output: demo-out\n", "", 1), nil,
			[]string{"pipelines[0].output_format.value.subject: the topic strategy names the subject after the output topic"}},
		{"a key mistyped", strings.Replace(withSchema, "    input_format:\n      value: {format: confluent}", "    input_format:\n      valeu: {format: confluent}", 1), nil,
			[]string{"pipelines[0].input_format.valeu: unknown key"}},
		{"not a URL", withSchema, []string{"schema_registry.url=registry:8081"},
			[]string{`schema_registry.url: "registry:8081": want an http:// or https:// URL`}},
		{"credentials in the URL", withSchema, []string{"schema_registry.url=https://key:secret@registry.example"},
			[]string{"schema_registry.url: carries credentials"}},
		{"username without a password", withSchema, []string{"schema_registry.basic_auth.username=KEY"},
			[]string{"schema_registry.basic_auth.password_file: basic auth needs a password", "WASMSTREAM_SCHEMA_REGISTRY_PASSWORD"}},
		{"password in the file", strings.Replace(withSchema, "  url: http://registry.example:8081\n", "  url: http://registry.example:8081\n  basic_auth: {username: KEY, password: hunter2hunter2}\n", 1), nil,
			[]string{"schema_registry.basic_auth.password: refused", "schema_registry.basic_auth.password_file", "WASMSTREAM_SCHEMA_REGISTRY_PASSWORD"}},
		{"password on --set", withSchema, []string{"schema_registry.basic_auth.username=KEY", "schema_registry.basic_auth.password=hunter2hunter2"},
			[]string{"--set schema_registry.basic_auth.password: refused", "WASMSTREAM_SCHEMA_REGISTRY_PASSWORD"}},
		{"cert without key", withSchema, []string{"schema_registry.tls.cert_file=c.pem"},
			[]string{"schema_registry.tls.cert_file: cert_file and key_file go together"}},
		{"refresh too often", withSchema, []string{"schema_registry.refresh_period=10ms"},
			[]string{"schema_registry.refresh_period: 10ms is below the minimum of 1s"}},
		{"auth without a url", noURL, []string{"schema_registry.token_file=t"},
			[]string{"schema_registry.token_file: is set but schema_registry.url is not"}},
		{"auto_register without a schema file", outValue("{format: confluent, auto_register: true}"), nil,
			[]string{"pipelines[0].output_format.value.schema_file: auto_register registers the schema in schema_file, and none is set"}},
		{"a schema file of another type", outValue("{format: confluent, schema_file: order.avdl}"), nil,
			[]string{`pipelines[0].output_format.value.schema_file: "order.avdl": want a .avsc (Avro), .proto (Protobuf) or .json (JSON Schema) file`}},
		{"a schema file and a version", outValue("{format: confluent, schema_file: order.avsc, version: 2}"), nil,
			[]string{"pipelines[0].output_format.value.version: 2 and schema_file both name the schema written"}},
		{"a schema file on a raw output", outValue("{format: confluent}\n      key: {schema_file: k.avsc, auto_register: true}"), nil,
			[]string{"pipelines[0].output_format.key.schema_file: is set but format is raw", "pipelines[0].output_format.key.auto_register: is set but format is raw"}},
	} {
		if tc.want == nil {
			tc.yaml = strings.Replace(withSchema, "value: {format: confluent}\n    output_format", "value: {format: avro}\n    output_format", 1)
			tc.want = []string{`pipelines[0].input_format.value.format: "avro": want raw or confluent`}
		}
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.yaml), nil, tc.sets)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
	// The password from the environment, by its short name.
	c, err := Load(write(t, withSchema), []string{"WASMSTREAM_SCHEMA_REGISTRY_PASSWORD=hunter2hunter2"}, []string{"schema_registry.basic_auth.username=KEY"})
	if err != nil || c.SchemaRegistry.BasicAuth.Password != "hunter2hunter2" {
		t.Fatalf("the password from WASMSTREAM_SCHEMA_REGISTRY_PASSWORD: %v", err)
	}
	if s := c.SchemaRegistry.BasicAuth.String(); strings.Contains(s, "hunter2") {
		t.Fatalf("printed: %s", s)
	}
}
