package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// The schemas of the framed tests: the uppercase processor upper-cases a
// record's JSON text, so its output fits a schema with upper-case names.
const (
	userAvsc  = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"id","type":"long"},{"name":"tags","type":{"type":"array","items":"string"},"default":[]}]}`
	upperAvsc = `{"type":"record","name":"Upper","fields":[{"name":"NAME","type":"string"},{"name":"ID","type":"long"},{"name":"TAGS","type":{"type":"array","items":"string"},"default":[]}]}`
	userProto = "syntax = \"proto3\";\npackage t;\nmessage Other { bool x = 1; }\nmessage User { string name = 1; int64 id = 2; }\n"
	userJSON  = `{"type":"object","properties":{"name":{"type":"string"},"id":{"type":"integer"}},"required":["name","id"]}`
	upperJSON = `{"type":"object","properties":{"NAME":{"type":"string"},"ID":{"type":"integer"}},"required":["NAME","ID"],"additionalProperties":false}`
)

// wasmstream test on schema-registry data, offline: with a config whose
// pipeline decodes and encodes Avro (input_format, output_format
// confluent) and the schemas given as files (--schema), a vector's JSON
// value is framed with the input topic's subject, decoded by the host's
// path for the guest, the guest's output encoded with the output subject
// and read back, and the expected JSON compared with it; a wrong
// expectation fails naming the field that differs, a frame the host refuses
// fails the record without a call (schema.bad_frame), an output that does
// not fit its schema fails it (schema.encode).
func TestTestCommandFramedAvro(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	mod := writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	writeFile(t, dir, "user.avsc", []byte(userAvsc))
	writeFile(t, dir, "upper.avsc", []byte(upperAvsc))
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: up
    module: uppercase.wasm
    inputs: [users]
    output: shouted
    dead_letter_topic: dlq
    input_format: {value: {format: confluent}}
    output_format: {value: {format: confluent}}
`))
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"name": "upper", "key": "k", "value": {"name": "ada", "id": 1, "tags": ["x"]}, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": {"NAME": "ADA", "ID": 1, "TAGS": ["X"]}}]}}
{"name": "defaults", "value": {"name": "bob", "id": 2}, "expect": {"outcome": "ok", "outputs": [{"value": {"NAME": "BOB", "ID": 2}}]}}
{"name": "wrong", "value": {"name": "cyd", "id": 3}, "expect": {"outcome": "ok", "outputs": [{"value": {"NAME": "CYD", "ID": 4}}]}}
{"name": "bad frame", "value_base64": "AQAAAAE=", "expect": {"outcome": "fail", "error": "magic byte"}}
`))
	schemas := []string{"--schema", "users-value=" + filepath.Join(dir, "user.avsc"), "--schema", "shouted-value=" + filepath.Join(dir, "upper.avsc")}
	code, out, errs := runCLI(t, append(append([]string{"test", "--config", cfg}, schemas...), mod, "--file", vectors)...)
	if code != 1 {
		t.Fatalf("one wrong expectation: code %d, want 1\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		`── upper (line 1): key "k" value "{\"name\":\"ada\",\"id\":1,\"tags\":[\"x\"]}"`,
		"(value framed: schema id 1, ", // the guest read the JSON above
		`→ output 0 to shouted (the pipeline's output): key "k" value "{\"NAME\":\"ADA\",\"ID\":1,\"TAGS\":[\"X\"]}" (value framed: schema id 2, `,
		`value "{\"name\":\"bob\",\"id\":2,\"tags\":[]}"`, // the default, as the host decodes it
		"output 0 value.ID: got 3, want 4",                // the field that differs, not the two documents
		"fail (schema.bad_frame, in the host):",
		"4 record(s): 3 ok, 0 dropped, 0 retry, 1 fail; expectations: 3 passed, 1 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}

	// --json: the schema ids of the record and of its outputs.
	code, out, errs = runCLI(t, append(append([]string{"test", "--json", "--config", cfg}, schemas...), mod, "--file", vectors)...)
	var doc struct {
		Records []struct {
			ValueSchemaID int `json:"value_schema_id"`
			Kind          string
			Outputs       []struct {
				Value         string
				ValueSchemaID int `json:"value_schema_id"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || len(doc.Records) != 4 {
		t.Fatalf("--json: code %d, %v\n%s\n%s", code, err, out, errs)
	}
	if r := doc.Records[0]; r.ValueSchemaID != 1 || len(r.Outputs) != 1 || r.Outputs[0].ValueSchemaID != 2 || r.Outputs[0].Value != `{"NAME":"ADA","ID":1,"TAGS":["X"]}` {
		t.Errorf("--json: record 0 %+v", r)
	}
	if r := doc.Records[3]; r.Kind != "schema.bad_frame" || r.ValueSchemaID != 0 {
		t.Errorf("--json: record 3 %+v", r)
	}

	// output_format.value.schema_file with auto_register: the host
	// registers the file under the output subject at start (in the files'
	// registry), and writes with it; without auto_register, the subject
	// must hold it.
	for _, tc := range []struct {
		auto bool
		code int
		want string
	}{
		{true, 0, "expectations: 2 passed, 0 failed"},
		{false, 2, "pipeline up writes its outputs with upper.avsc (output_format.value.schema_file), which the subject shouted-value must hold: serve it with --schema shouted-value=" + filepath.Join(dir, "upper.avsc") + ", or set output_format.value.auto_register: true"},
	} {
		sf := writeFile(t, dir, "schemafile.yaml", []byte(strings.Replace(string(readFile(t, cfg)), "output_format: {value: {format: confluent}}",
			fmt.Sprintf("output_format: {value: {format: confluent, schema_file: upper.avsc, auto_register: %v}}", tc.auto), 1)))
		two := writeFile(t, dir, "two.jsonl", []byte(strings.Join(strings.Split(string(readFile(t, vectors)), "\n")[:2], "\n")+"\n"))
		code, out, errs := runCLI(t, "test", "--config", sf, "--schema", "users-value="+filepath.Join(dir, "user.avsc"), mod, "--file", two)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Errorf("schema_file, auto_register %v: code %d, want %d and %q\n%s\n%s", tc.auto, code, tc.code, tc.want, out, errs)
		}
	}

	// The output subject's schema does not take the guest's output: the
	// record fails in the host, as in the pipeline.
	notFit := writeFile(t, dir, "nofit.jsonl", []byte(`{"value": {"name": "ada", "id": 1}, "expect": {"outcome": "ok"}}`+"\n"))
	code, out, errs = runCLI(t, "test", "--config", cfg, "--schema", "users-value="+filepath.Join(dir, "user.avsc"), "--schema", "shouted-value="+filepath.Join(dir, "user.avsc"), mod, "--file", notFit)
	if code != 1 || !strings.Contains(out, "fail (schema.encode, in the host): output 0 value: the output does not fit subject shouted-value") {
		t.Errorf("an output that does not fit: code %d\n%s\n%s", code, out, errs)
	}

	// Bad input: exit 2, naming the file and line, the field, the file.
	writeFile(t, dir, "broken.avsc", []byte(`{"type":"record","name":"User","fields":[{"name":"name","type":"strin"}]}`))
	for _, tc := range []struct {
		name, vectors string
		args          []string
		want          string
	}{
		{"json that does not fit", `{"value": {"name": 5, "id": 1}}`, schemas,
			"v2.jsonl:1: value: does not fit subject users-value (" + filepath.Join(dir, "user.avsc") + "): avro: field name: want a string, got the number 5"},
		{"an expected output that does not fit", `{"value": {"name": "a", "id": 1}, "expect": {"outcome": "ok", "outputs": [{"value": {"NAME": "A"}}]}}`, schemas,
			"v2.jsonl:1: expect.outputs[0].value: does not fit subject shouted-value (" + filepath.Join(dir, "upper.avsc") + "): "},
		{"a schema that does not compile", `{"value": {"name": "a", "id": 1}}`, []string{"--schema", "users-value=" + filepath.Join(dir, "broken.avsc")},
			"broken.avsc is not a schema wasmstream reads as Avro: "},
		{"no schema for the input's subject", `{"value": {"name": "a", "id": 1}}`, []string{"--schema", "shouted-value=" + filepath.Join(dir, "upper.avsc")},
			"v2.jsonl:1: value: no schema for subject users-value: give value_schema (a file) or serve the subject with --schema users-value=FILE"},
		{"no schema for the output's subject", `{"value": {"name": "a", "id": 1}}`, []string{"--schema", "users-value=" + filepath.Join(dir, "user.avsc")},
			"pipeline up writes its outputs with subject shouted-value (output_format), and no schema file is served as it: add --schema shouted-value=FILE"},
		{"a schema named for the output the pipeline encodes", `{"value": {"name": "a", "id": 1}, "expect": {"outcome": "ok", "outputs": [{"value_schema": "upper.avsc", "value": {"NAME": "A", "ID": 1}}]}}`, schemas,
			"pipeline up writes output values with subject shouted-value (output_format.value)"},
		{"a schema file of no known type", `{"value_schema": "user.txt", "value": {}}`, schemas,
			`v2.jsonl:1: value_schema: "user.txt": want a schema file ending in .avsc (Avro), .proto (Protobuf) or .json (JSON Schema)`},
		{"a missing --schema file", `{"value": {}}`, []string{"--schema", "users-value=" + filepath.Join(dir, "nope.avsc")},
			"--schema users-value=" + filepath.Join(dir, "nope.avsc") + ": stat "},
	} {
		v2 := writeFile(t, dir, "v2.jsonl", []byte(tc.vectors+"\n"))
		code, out, errs := runCLI(t, append(append([]string{"test", "--config", cfg}, tc.args...), mod, "--file", v2)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: code %d, want 2 and %q\n%s\n%s", tc.name, code, tc.want, out, errs)
		}
	}

	// A pipeline that reads values as they are, and a vector that frames
	// one: the host would give the guest the framed bytes.
	raw := writeFile(t, dir, "raw.yaml", []byte("kafka: {brokers: [127.0.0.1:1], group: g}\nadmin: {enabled: false}\npipelines:\n  - {name: up, module: uppercase.wasm, inputs: [users], output: shouted, dead_letter_topic: dlq}\n"))
	v3 := writeFile(t, dir, "v3.jsonl", []byte(`{"value_schema": "user.avsc", "value": {"name": "a", "id": 1}}`+"\n"))
	if code, out, errs := runCLI(t, "test", "--config", raw, mod, "--file", v3); code != 2 || !strings.Contains(errs, "input_format.value.format is raw in "+raw) {
		t.Errorf("a framed vector on a raw pipeline: code %d\n%s\n%s", code, out, errs)
	}
}

// Without a config, the vectors name their schemas: a value_schema turns
// the decoding of values on, as input_format would, and an expected
// output's schema encodes the guest's output to be compared, in each
// schema type (an Avro, a Protobuf with a message named, a JSON Schema).
func TestTestCommandFramedFiles(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	mod := writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	sdir := filepath.Join(dir, "schemas")
	writeFile(t, dir, "user.avsc", []byte(userAvsc)) // beside the vectors, and in schemas/ (relative paths are the vectors file's)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, sdir, "upper.avsc", []byte(upperAvsc))
	writeFile(t, sdir, "user.proto", []byte(userProto))
	writeFile(t, sdir, "user.json", []byte(userJSON))
	// A .proto that imports another beside it: served as a reference.
	writeFile(t, sdir, "money.proto", []byte("syntax = \"proto3\";\npackage shop;\nmessage Money { int64 cents = 1; }\n"))
	writeFile(t, sdir, "order.proto", []byte("syntax = \"proto3\";\npackage shop;\nimport \"money.proto\";\nimport \"google/protobuf/timestamp.proto\";\nmessage Order { string id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }\n"))
	writeFile(t, sdir, "broken.proto", []byte("syntax = \"proto3\";\nimport \"nope.proto\";\nmessage B { int32 x = 1; }\n"))
	writeFile(t, sdir, "upper.json", []byte(upperJSON))
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"name": "avro", "value_schema": "user.avsc", "value": {"name": "ada", "id": 1}, "expect": {"outcome": "ok", "outputs": [{"value_schema": "schemas/upper.avsc", "value": {"NAME": "ADA", "ID": 1}}]}}
{"name": "protobuf", "value_schema": "schemas/user.proto", "value_message": "User", "value": {"name": "bob", "id": 2}, "expect": {"outcome": "ok", "outputs": [{"value": {"NAME": "BOB", "ID": "2"}}]}}
{"name": "json schema", "value_schema": "schemas/user.json", "value": {"name": "dee", "id": 4}, "expect": {"outcome": "ok", "outputs": [{"value_schema": "schemas/upper.json", "value": {"ID": 4, "NAME": "DEE"}}]}}
{"name": "an import", "value_schema": "schemas/order.proto", "value": {"id": "x", "total": {"cents": 5}, "at": "2024-01-15T10:04:05Z"}, "expect": {"outcome": "ok", "outputs": [{"value": {"ID": "X", "TOTAL": {"CENTS": "5"}, "AT": "2024-01-15T10:04:05Z"}}]}}
{"name": "does not fit the expected schema", "value_schema": "user.avsc", "value": {"name": "cyd", "id": 3}, "expect": {"outcome": "ok", "outputs": [{"value_schema": "user.avsc", "value": {"name": "cyd", "id": 3}}]}}
`))
	code, out, errs := runCLI(t, "test", mod, "--file", vectors)
	if code != 1 {
		t.Fatalf("one output not fitting: code %d, want 1\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		`── avro (line 1): key null value "{\"name\":\"ada\",\"id\":1,\"tags\":[]}"`,
		`── protobuf (line 2): key null value "{\"name\":\"bob\",\"id\":\"2\"}"`, // proto3 JSON: 64-bit integers as strings
		"output 0 value: does not fit the expected output's schema: ",
		"(value framed: schema id 3, ", // the third schema file served
		"expectations: 4 passed, 1 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}
	if n := strings.Count(out, "expect: PASS"); n != 4 {
		t.Errorf("%d passed, want 4\n%s", n, out)
	}
	broken := writeFile(t, dir, "broken.jsonl", []byte(`{"value_schema": "schemas/broken.proto", "value": {"x": 1}}`+"\n"))
	if code, out, errs := runCLI(t, "test", mod, "--file", broken); code != 2 || !strings.Contains(errs, "broken.jsonl:1: value_schema: "+filepath.Join(sdir, "broken.proto")+" imports nope.proto (looked for beside it): stat "+filepath.Join(sdir, "nope.proto")) {
		t.Errorf("a missing import: code %d\n%s\n%s", code, out, errs)
	}
}

// wasmstream demo on schema-registry data: the --input lines, JSON, are
// framed with the input topic's subject served from --schema's file, the
// pipeline decodes them for the guest and encodes its outputs, and the
// demo prints the outputs as their JSON read back; a line that does not
// fit, or a subject no file serves, stops the demo before it starts,
// naming them.
func TestDemoFramedInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	user := writeFile(t, dir, "user.avsc", []byte(userAvsc))
	upper := writeFile(t, dir, "upper.avsc", []byte(upperAvsc))
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [embedded], group: g, create_topics: true}
admin: {enabled: false}
metrics: {listen: "127.0.0.1:0"}
schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: up
    module: uppercase.wasm
    inputs: [users]
    output: shouted
    dead_letter_topic: dlq
    input_format: {value: {format: confluent}}
    output_format: {value: {format: confluent}}
`))
	in := writeFile(t, dir, "in.jsonl", []byte(`{"name": "ada", "id": 1, "tags": ["x"]}`+"\n"+`{"name": "bob", "id": 2}`+"\n"))
	code, out, errs := runCLI(t, "demo", "--config", cfg, "--lookup-service", "", "--input", in,
		"--schema", "users-value="+user, "--schema", "shouted-value="+upper, "--duration", "10s")
	if code != 0 {
		t.Fatalf("demo: code %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		`→ users            {"name": "ada", "id": 1, "tags": ["x"]}  (framed: schema id 1)`,
		`← shouted          {"NAME":"ADA","ID":1,"TAGS":["X"]}  (framed: schema id 2)`,
		`← shouted          {"NAME":"BOB","ID":2,"TAGS":[]}  (framed: schema id 2)`,
		"[up] done 2 · outputs 2 · dropped (no output) 0 · retried 0 · dead-lettered 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q\n%s", want, out)
		}
	}

	// Without --input, the generated records are not framed: said before
	// the demo starts.
	code, out, errs = runCLI(t, "demo", "--config", cfg, "--lookup-service", "", "--schema", "users-value="+user, "--schema", "shouted-value="+upper, "--duration", "1s", "--rate", "0")
	if code != 0 || !strings.Contains(errs, "wasmstream demo: pipeline up decodes its input values (input_format.value: confluent), and the generated demo records are not framed") {
		t.Errorf("demo without --input: code %d\n%s\n%s", code, out, errs)
	}

	bad := writeFile(t, dir, "bad.jsonl", []byte(`{"name": "ada", "id": 1}`+"\n"+`{"name": 5, "id": 2}`+"\n"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", bad, "--schema", "users-value=" + user, "--schema", "shouted-value=" + upper},
			"--input " + bad + ": record 2: does not fit subject users-value (" + user + "): avro: field name: want a string, got the number 5"},
		{[]string{"--input", in, "--schema", "shouted-value=" + upper},
			"pipeline up decodes the values of users (input_format.value), and --input's lines are framed for it with subject users-value, and no schema file is served as it: add --schema users-value=FILE"},
		{[]string{"--input", in, "--schema", "users-value=" + user},
			"pipeline up writes its outputs with subject shouted-value (output_format), and no schema file is served as it: add --schema shouted-value=FILE"},
	} {
		code, out, errs := runCLI(t, append([]string{"demo", "--config", cfg, "--lookup-service", "", "--duration", "1s"}, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("code %d, want 1 and %q\n%s\n%s", code, tc.want, out, errs)
		}
	}
}

// wasmstream test against the config's registry (schema_registry.url; a
// fake one here): keys and values framed with the subjects of their topic
// (users-key, users-value) or the one a vector names (value_subject: a
// record written with an older schema), outputs' keys and values encoded
// with the output's subjects, the expected key and value compared as
// read back. wasmstream conformance refuses such vectors: it runs records
// as they are.
func TestTestCommandRegistrySubjects(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	mod := writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	reg := srfake.New()
	defer reg.Close()
	for subject, schema := range map[string]string{
		"users-key": `"string"`, "users-value": userAvsc, "shouted-key": `"string"`, "shouted-value": upperAvsc,
		"legacy-user": `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"id","type":"int"}]}`,
	} {
		if _, _, err := reg.RegisterSchema(subject, sr.Schema{Schema: schema, Type: sr.TypeAvro}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [127.0.0.1:1], group: g}
admin: {enabled: false}
schema_registry: {url: "`+reg.URL()+`", request_timeout: 2s}
pipelines:
  - name: up
    module: uppercase.wasm
    inputs: [users]
    output: shouted
    dead_letter_topic: dlq
    input_format: {key: {format: confluent}, value: {format: confluent}}
    output_format: {key: {format: confluent}, value: {format: confluent}}
`))
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"name": "both framed", "key": "k1", "value": {"name": "ada", "id": 1}, "expect": {"outcome": "ok", "outputs": [{"key": "k1", "value": {"NAME": "ADA", "ID": 1}}]}}
{"name": "an older schema", "key": "k2", "value_subject": "legacy-user", "value": {"name": "bob", "id": 2}, "expect": {"outcome": "ok", "outputs": [{"key": "k2", "value": {"NAME": "BOB", "ID": 2, "TAGS": []}}]}}
`))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
	if code != 0 {
		t.Fatalf("code %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		`── both framed (line 1): key "\"k1\"" value "{\"name\":\"ada\",\"id\":1,\"tags\":[]}"`,
		`── an older schema (line 2): key "\"k2\"" value "{\"name\":\"bob\",\"id\":2}"`, // as the legacy schema decodes it
		"(key framed: schema id ",
		`key "\"k2\"" value "{\"NAME\":\"BOB\",\"ID\":2,\"TAGS\":[]}" (key framed: schema id `,
		"expectations: 2 passed, 0 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q\n%s", want, out)
		}
	}
	// Without a config: --registry names the registry of the vectors'
	// subjects; an expected output's subject encodes the guest's output.
	bare := writeFile(t, dir, "bare.jsonl", []byte(`{"value_subject": "users-value", "value": {"name": "ada", "id": 1}, "expect": {"outcome": "ok", "outputs": [{"value_subject": "shouted-value", "value": {"NAME": "ADA", "ID": 1}}]}}`+"\n"))
	if code, out, errs := runCLI(t, "test", "--registry", reg.URL(), mod, "--file", bare); code != 0 || !strings.Contains(out, "expectations: 1 passed, 0 failed") {
		t.Errorf("--registry: code %d\n%s\n%s", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--registry", reg.URL(), "--schema", "users-value=" + writeFile(t, dir, "user.avsc", []byte(userAvsc))}, "--registry " + reg.URL() + " and schema files"},
		{nil, "the vectors name registry subjects, and there is no registry: give its URL (--registry, or schema_registry.url in the config), or the schema files (--schema SUBJECT=FILE)"},
	} {
		if code, out, errs := runCLI(t, append(append([]string{"test"}, tc.args...), mod, "--file", bare)...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("code %d, want 2 and %q\n%s\n%s", code, tc.want, out, errs)
		}
	}

	if code, _, errs := runCLI(t, "conformance", "--vectors", vectors, mod); code != 2 || !strings.Contains(errs, vectors+":2: names a schema (*_schema, *_subject): the kit runs records as they are; run schema-registry vectors with wasmstream test") {
		t.Errorf("conformance on framed vectors: code %d\n%s", code, errs)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
